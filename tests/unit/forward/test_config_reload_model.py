"""The upstream config readers as a state machine, checked against a small reference model after every poll.

Three sources change under the agent: the kube-dns ConfigMap's directory (`stubDomains`,
`upstreamNameservers`; an optional mount, so the directory itself may be absent) and the --config file's
`zones:`. Each file is written valid, written invalid, rewritten with the same text, removed and
recreated, in any order; the directory is unmounted and mounted again; and the watcher polls (its
period, or SIGHUP: both read every source once). The model, from docs/operators.md and docs/cache.md:
the config in force is what all the sources held at the last poll where every one was usable (a
missing ConfigMap key or directory is usable: no stub domains, the flags' upstream; a missing --config
file, a domain written twice, JSON or YAML that cannot be read are not, and keep the last good config
whole); a poll that finds the same text applies nothing; a reload drops the cached answers of exactly
the zones whose settings (not only upstreams) changed, added or removed; each new bad content is one
error, and the status says invalid until the files are usable again."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from nodedns.forward.routes import ConfigWatcher, RouteSources
from nodedns.forward.upstream import Forwarder

FLAG_UPSTREAM = ("10.9.0.1", 53)  # --upstream: the root when upstreamNameservers says nothing

# each valid text and what it means: stub domains (domain -> servers), the root, the zones (name -> max-ttl)
STUBS: dict[str, dict[str, tuple[tuple[str, int], ...]]] = {
    '{"acme.local": ["10.3.0.53"]}': {"acme.local": (("10.3.0.53", 53),)},
    '{"acme.local": ["10.3.0.54"], "b.local": ["10.4.0.53:5353"]}':
        {"acme.local": (("10.3.0.54", 53),), "b.local": (("10.4.0.53", 5353),)},
    "": {},
}
BAD_STUBS = ['{"acme.local": []}', "not json", '{"-bad-.local": ["10.3.0.53"]}']
UPSTREAMS: dict[str, tuple[tuple[str, int], ...]] = {
    '["10.5.0.1"]': (("10.5.0.1", 53),),
    '["10.5.0.2", "10.5.0.3:5353"]': (("10.5.0.2", 53), ("10.5.0.3", 5353)),
    "[]": (),
}
BAD_UPSTREAMS = ['["10.5.0.1", "10.5.0.2", "10.5.0.3", "10.5.0.4"]', "{", '["not an address"]']
ZONES: dict[str, dict[str, str]] = {
    "zones:\n  corp.example:\n    upstreams: [\"10.1.0.53\"]\n    cache: {max-ttl: 300s}\n": {"corp.example": "300"},
    "zones:\n  corp.example:\n    upstreams: [\"10.1.0.54\"]\n    cache: {max-ttl: 300s}\n": {"corp.example": "300"},
    ("zones:\n  corp.example:\n    upstreams: [\"10.1.0.53\"]\n    cache: {max-ttl: 60s}\n"
     "  lab.example:\n    upstreams: [\"10.2.0.53\"]\n"): {"corp.example": "60", "lab.example": ""},
    "zones: {}\n": {},
}
BAD_ZONES = [
    # a domain written twice (once with its final dot) is refused, not the last one taken
    "zones:\n  corp.example:\n    upstreams: [\"10.1.0.53\"]\n  corp.example.:\n    upstreams: [\"10.1.0.9\"]\n",
    "zones: [\n",
    "zones:\n  corp.example:\n    cache: {max-ttl: soon}\n",
]
FILES: dict[str, tuple[dict[str, Any], list[str]]] = {
    "stubDomains": (STUBS, BAD_STUBS), "upstreamNameservers": (UPSTREAMS, BAD_UPSTREAMS),
    "config": (ZONES, BAD_ZONES)}


class ConfigMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="nodedns-config-model-")
        self.kube_dir = os.path.join(self.root, "kube-dns")
        self.config = os.path.join(self.root, "config.yaml")
        os.mkdir(self.kube_dir)
        first_zones = next(iter(ZONES))
        with open(self.config, "w") as fh:
            fh.write(first_zones)
        self.disk: dict[str, str | None] = {"stubDomains": None, "upstreamNameservers": None, "config": first_zones}
        self.mounted = True
        self.mounted_at_poll = True
        self.sources = RouteSources(upstream=(FLAG_UPSTREAM,), kube_dns_dir=self.kube_dir, config_file=self.config)
        snap = self.sources.snapshot()
        self.forwarder = Forwarder(routes=self.sources.build(snap))
        self.dropped: list[set[str]] = []
        self.watcher = ConfigWatcher(self.sources, self.forwarder, snapshot=snap,
                                     on_zones=lambda table, changed: self.dropped.append(set(changed)))
        # the model
        self.in_force = dict(self.disk)  # the texts of the config in force
        self.reloads = 0
        self.errors = 0
        self.last_bad: tuple[str | None, ...] | None = None
        self.invalid = False

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def _path(self, name: str) -> str:
        return self.config if name == "config" else os.path.join(self.kube_dir, name)

    def _write(self, name: str, text: str) -> None:
        if name != "config" and not self.mounted:
            return
        tmp = self._path(name) + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(text)
        os.replace(tmp, self._path(name))  # as the kubelet swaps a ConfigMap's files
        self.disk[name] = text

    # -- edits -----------------------------------------------------------------------------------

    @rule(name=st.sampled_from(sorted(FILES)), pick=st.integers(0, 10))
    def edit_valid(self, name: str, pick: int) -> None:
        good = list(FILES[name][0])
        self._write(name, good[pick % len(good)])

    @rule(name=st.sampled_from(sorted(FILES)), pick=st.integers(0, 10))
    def edit_invalid(self, name: str, pick: int) -> None:
        bad = FILES[name][1]
        self._write(name, bad[pick % len(bad)])

    @rule(name=st.sampled_from(sorted(FILES)))
    def rewrite_the_same_text(self, name: str) -> None:
        text = self.disk[name]
        if text is not None:
            self._write(name, text)

    @rule(name=st.sampled_from(sorted(FILES)))
    def remove(self, name: str) -> None:
        if os.path.exists(self._path(name)):
            os.remove(self._path(name))
        self.disk[name] = None

    @rule()
    def unmount_the_configmap(self) -> None:
        shutil.rmtree(self.kube_dir, ignore_errors=True)
        self.mounted = False
        self.disk["stubDomains"] = self.disk["upstreamNameservers"] = None

    @rule()
    def mount_the_configmap(self) -> None:
        if not self.mounted:
            os.mkdir(self.kube_dir)
            self.mounted = True

    # -- a poll (the period, or SIGHUP) -----------------------------------------------------------------

    def _usable(self, disk: dict[str, str | None]) -> bool:
        if disk["config"] is None:
            return False
        return all(disk[n] is None or disk[n] in FILES[n][0] for n in FILES)

    def _zones(self, texts: dict[str, str | None]) -> dict[str, Any]:
        """Each zone's settings but its upstreams (what decides whether its cached answers stay)."""
        out: dict[str, Any] = {}
        assert texts["config"] is not None
        if not ZONES[texts["config"]]:
            return out  # no zones: no zone table, every name under the flags' settings
        stubs = STUBS.get(texts["stubDomains"] or "", {})
        out.update({name: "stub" for name in stubs})
        out.update(ZONES[texts["config"]])
        return out

    @rule()
    def poll(self) -> None:
        before = dict(self.in_force)
        self.mounted_at_poll = self.mounted
        applied = asyncio.run(self.watcher.poll_once())
        disk = dict(self.disk)
        if not self._usable(disk):
            # a config file gone is one reason however the other files change; else each new content is one
            marker = ("gone",) if disk["config"] is None else tuple(disk.values())
            if marker != self.last_bad:
                self.errors += 1
            self.last_bad = marker
            self.invalid = True
            assert applied is False
            return
        self.last_bad = None
        self.invalid = False
        if disk == self.in_force:
            assert applied is False, "the same text applied again"
            return
        assert applied is True
        self.reloads += 1
        self.in_force = disk
        old, new = self._zones(before), self._zones(disk)
        changed = {z for z in old.keys() | new.keys() if old.get(z) != new.get(z)}
        if changed:
            assert self.dropped and self.dropped[-1] - {""} == changed, (self.dropped, changed)
            self.dropped.clear()
        else:
            assert all(d <= {""} for d in self.dropped), f"unchanged zones lost their cache: {self.dropped}"
            self.dropped.clear()

    # -- after every step ---------------------------------------------------------------------------------

    @invariant()
    def the_config_in_force_is_the_models(self) -> None:
        texts = self.in_force
        routes = self.forwarder.routes()
        stubs = STUBS.get(texts["stubDomains"] or "", {})
        root = UPSTREAMS.get(texts["upstreamNameservers"] or "[]", ()) or (FLAG_UPSTREAM,)
        assert texts["config"] is not None
        zones = ZONES[texts["config"]]
        assert routes.root == root
        assert set(routes.stubs) == set(stubs) | set(zones)
        for domain, servers in stubs.items():
            if domain not in zones:
                assert routes.stubs[domain][0] == servers
        for name, ttl in zones.items():
            assert routes.zones[name].cache.success_ttl == (int(ttl) if ttl else routes.zones[""].cache.success_ttl)
        status = self.watcher.status()
        assert (status["reloads"], status["errors"], status["invalid"]) == (self.reloads, self.errors, self.invalid)
        assert status["kube_dns_config_dir"]["exists"] is self.mounted_at_poll


TestConfigReload = ConfigMachine.TestCase
TestConfigReload.settings = settings(max_examples=60, stateful_step_count=30, deadline=None,
                                     suppress_health_check=[HealthCheck.too_slow])
