"""The clusterset zone over real sockets: dnspython against a running agent, from manifests and live.

The table of `tests/support/clusterset_fixture.py` (the MCS DNS specification's examples: ClusterSetIP and
headless imports, dual-stack, several source clusters, endpoints not ready, the names that MUST NOT
exist) over UDP and TCP; the same hit path, metrics (zone label), `nodedns lookup` and `nodedns
explain` as the cluster zone; the live sync from the API double (ServiceImports and imported slices
added, changed, deleted; targeted invalidation); a cluster without the ServiceImport CRD, or without
the RBAC grant; the shipped DaemonSet configuration with the multicluster overlay.
"""

from __future__ import annotations

import json
import logging
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dns.message
import dns.rcode
import pytest
import yaml

from nodedns.dns.keys import fast_key
from tests.support import cluster_fixture as cf
from tests.support import clusterset_fixture as mc
from tests.support.apiserver import FakeApiServer
from tests.support.cluster_zone import TRANSPORTS, ask, check
from tests.support.clusterset_agent import ZONE, fast_agent, live_config, wait_synced
from tests.support.clusterset_fixture import Case
from tests.support.helpers import (
    PROPAGATION_BOUND,
    ROOT,
    RunningAgent,
    answer_of,
    free_port,
    nodedns_cmd,
    query,
    rrset_values,
    running_agent,
    subprocess_env,
    until_answer,
    wait_for,
)
from tests.support.status_http import get, samples, value


def over_transports(cases: tuple[Case, ...]) -> Any:
    return [pytest.param(c, t, id=f"{c.id}-{t}") for c in cases for t in TRANSPORTS]


# ----------------------------------------------------------------------------------------------
# From manifests


@pytest.fixture(scope="module")
def manifest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("clusterset") / "clusterset.yaml"
    path.write_text(yaml.safe_dump(cf.as_list(mc.clusterset_objects())), encoding="utf-8")
    return path


def agent_config(manifest: Path, **extra: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {"manifests": str(manifest), "multicluster-zone": ZONE,
                           "authoritative-reverse": ",".join(mc.AUTHORITATIVE_REVERSE)}
    cfg.update(extra)
    return cfg


@pytest.fixture(scope="module")
def agent(manifest: Path) -> Iterator[RunningAgent]:
    with running_agent(agent_config(manifest, **{"status-listen": "127.0.0.1:0", "debug-listen": "127.0.0.1:0"})) as a:
        yield a


@pytest.mark.parametrize(("case", "transport"), over_transports(mc.CASES))
def test_clusterset_zone_answers_as_the_mcs_spec_says(agent: RunningAgent, case: Case, transport: str) -> None:
    check(agent, case, transport)  # type: ignore[arg-type]  # the clusterset Case has the same fields


@pytest.mark.parametrize(("case", "transport"), over_transports(mc.POD_NAME_CASES))
def test_endpoint_pod_names_name_imported_endpoints_after_their_pod(manifest: Path, case: Case,
                                                                    transport: str) -> None:
    with running_agent(agent_config(manifest, **{"endpoint-pod-names": True})) as a:
        check(a, case, transport)  # type: ignore[arg-type]


def test_the_schema_version_is_1_0_0_with_the_spec_ttl(agent: RunningAgent) -> None:
    r = ask(agent, f"dns-version.{ZONE}", "TXT", "udp")
    assert [(rrset.ttl, rrset[0].to_text()) for rrset in r.answer] == [(28800, '"1.0.0"')]
    cluster = ask(agent, f"dns-version.{cf.ZONE}", "TXT", "udp")  # the cluster zone keeps its own
    assert cluster.answer[0][0].to_text() == '"1.1.0"'


def test_the_clusterset_apex_has_its_own_soa(agent: RunningAgent) -> None:
    r = ask(agent, ZONE, "SOA", "udp")
    (rrset,) = r.answer
    assert rrset.name.to_text() == f"{ZONE}." and rrset[0].mname.to_text() == f"ns.dns.{ZONE}."


def test_without_the_flag_the_clusterset_zone_is_not_ours(manifest: Path) -> None:
    cfg = agent_config(manifest)
    del cfg["multicluster-zone"]
    with running_agent(cfg) as a:
        r = ask(a, f"myservice.test.svc.{ZONE}", "A", "udp")
        assert r.rcode() == dns.rcode.REFUSED  # not ours, and no upstream configured here
        assert a.call(lambda: "serviceimports" not in a.agent.index.counts())
        assert rrset_values(ask(a, f"myservice.test.svc.{cf.ZONE}", "A", "udp")) == ["10.96.0.10"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_repeated_questions_are_served_from_stored_bytes(agent: RunningAgent, transport: str) -> None:
    """The clusterset answers take the cluster zone's hit path: stored once, then served from bytes."""
    hits = agent.call(lambda: agent.agent.server.hits)
    for case in mc.CASES[:30]:
        check(agent, case, transport)  # type: ignore[arg-type]
        check(agent, case, transport)  # type: ignore[arg-type]
    if transport == "udp":
        assert agent.call(lambda: agent.agent.server.hits) >= hits + 30


def test_metrics_count_clusterset_answers_under_their_zone(agent: RunningAgent) -> None:
    before = samples(agent)
    for _ in range(3):
        ask(agent, f"myservice.test.svc.{ZONE}", "A", "udp")
    ask(agent, f"nope.test.svc.{ZONE}", "A", "udp")
    after = samples(agent)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    server = f"dns://{agent.host}:{agent.port}"
    assert delta("coredns_dns_requests_total", server=server, zone=f"{ZONE}.", view="", proto="udp",
                 family="1", type="A") == 4
    assert delta("coredns_dns_responses_total", server=server, zone=f"{ZONE}.", view="", rcode="NXDOMAIN",
                 plugin="kubernetes") == 1
    assert value(after, "nodedns_index_objects", kind="serviceimports") == 15
    assert value(after, "nodedns_index_objects", kind="imported_endpointslices") == 13


def lookup(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(nodedns_cmd("lookup", *args), env=subprocess_env(), capture_output=True, text=True,
                          timeout=60)


def test_nodedns_lookup_explains_a_clusterset_answer(agent: RunningAgent) -> None:
    r = lookup(f"_https._tcp.headless.test.svc.{ZONE}", "SRV", "--debug", agent.debug_url)
    assert r.returncode == 0, r.stderr
    assert "path:     cluster index (the clusterset zone of Multi-Cluster Services, " in r.stdout
    assert f"SRV 0 16 443 my-pet-1.cluster-b.headless.test.svc.{ZONE}." in r.stdout
    assert f"my-pet-1.cluster-a.headless.test.svc.{ZONE}. 5 AAAA 2001:db8::1" in r.stdout
    r = lookup(f"cluster-a.headless.test.svc.{ZONE}", "--debug", agent.debug_url)
    assert "rcode:    NXDOMAIN" in r.stdout and f"{ZONE}. 5 SOA ns.dns.{ZONE}." in r.stdout


def pod_manifest(tmp_path: Path, searches: list[str] | None) -> Path:
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "client", "namespace": "test"},
                           "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    if searches is not None:
        pod["spec"]["dnsConfig"] = {"searches": searches}
    path = tmp_path / f"pod-{len(searches or [])}.yaml"
    path.write_text(yaml.safe_dump(pod))
    return path


def explain(agent: RunningAgent, name: str, pod: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(nodedns_cmd("explain", name, "--pod", str(pod), "--debug", agent.debug_url, *extra),
                          env=subprocess_env(), capture_output=True, text=True, timeout=60)


def test_explain_shows_a_pod_opting_in_with_dnsconfig_searches(agent: RunningAgent, tmp_path: Path) -> None:
    """The kubelet puts no clusterset domain in the search list; dnsConfig.searches adds it, after the
    cluster's own: `v4only` (imported only) is found there."""
    opted = pod_manifest(tmp_path, [f"test.svc.{ZONE}", f"svc.{ZONE}"])
    r = explain(agent, "v4only", opted, "--type", "A", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["search"][:3] == [f"test.svc.{cf.ZONE}", f"svc.{cf.ZONE}", cf.ZONE]
    assert data["search"][-2:] == [f"test.svc.{ZONE}", f"svc.{ZONE}"]
    assert data["answered"] == f"v4only.test.svc.{ZONE}."
    assert [q["question"]["name"] for q in data["queries"]][-1] == f"v4only.test.svc.{ZONE}."
    assert data["queries"][-1]["answer"][0]["data"] == "10.42.0.2"
    assert any("answered from the clusterset zone" in a for a in data["advice"])
    text = explain(agent, "v4only", opted, "--type", "A").stdout
    assert f"search test.svc.{cf.ZONE} svc.{cf.ZONE} {cf.ZONE} test.svc.{ZONE} svc.{ZONE}" in text


def test_explain_says_where_a_name_exists_when_the_pod_did_not_opt_in(agent: RunningAgent, tmp_path: Path) -> None:
    r = explain(agent, "v4only", pod_manifest(tmp_path, None), "--type", "A", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["answered"] is None
    advice = " ".join(data["advice"])
    assert f"exists in the clusterset zone as v4only.test.svc.{ZONE}." in advice
    assert f"dnsConfig: {{searches: [test.svc.{ZONE}, svc.{ZONE}]}}" in advice


def test_a_local_service_of_the_same_name_answers_first_for_short_names(agent: RunningAgent,
                                                                         tmp_path: Path) -> None:
    """`myservice` exists in both zones: the cluster's search domains come first (the KEP's reason to
    write the clusterset name in full)."""
    data = json.loads(explain(agent, "myservice", pod_manifest(tmp_path, [f"test.svc.{ZONE}"]), "--type", "A",
                              "--json").stdout)
    assert data["answered"] == f"myservice.test.svc.{cf.ZONE}."
    assert f"answered by the cluster-local myservice.test.svc.{cf.ZONE}.; myservice.test.svc.{ZONE}. is the " \
           "clusterset service" in " ".join(data["advice"])


def test_resolv_conf_renders_the_opt_in_after_the_kubelets_cluster_domains(tmp_path: Path) -> None:
    """The kubelet adds no clusterset domain; a Pod's dnsConfig.searches puts it after the cluster's own
    and the host's (the file `nodedns resolv-conf` prints is the kubelet's)."""
    host = tmp_path / "resolv.conf"
    host.write_text("nameserver 10.1.1.10\nsearch corp.example\n")
    plain = subprocess.run(nodedns_cmd("resolv-conf", "--pod", str(pod_manifest(tmp_path, None)), "--resolv-conf",
                                       str(host), "--cluster-dns", "169.254.20.10", "--cluster-domain", cf.ZONE),
                           env=subprocess_env(), capture_output=True, text=True, timeout=60)
    assert plain.returncode == 0, plain.stderr
    assert ZONE not in plain.stdout
    opted = subprocess.run(nodedns_cmd("resolv-conf", "--pod", str(pod_manifest(tmp_path, [f"test.svc.{ZONE}",
                                                                                          f"svc.{ZONE}"])),
                                       "--resolv-conf", str(host), "--cluster-dns", "169.254.20.10",
                                       "--cluster-domain", cf.ZONE),
                           env=subprocess_env(), capture_output=True, text=True, timeout=60)
    assert opted.returncode == 0, opted.stderr
    assert opted.stdout == ("nameserver 169.254.20.10\n"
                            f"search test.svc.{cf.ZONE} svc.{cf.ZONE} {cf.ZONE} corp.example test.svc.{ZONE} "
                            f"svc.{ZONE}\n"
                            "options ndots:5\n")


# ----------------------------------------------------------------------------------------------
# Live, from the API server double


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        server.put("Namespace", cf.namespace("test"))
        yield server


def answer(agent: RunningAgent, name: str, rdtype: str = "A") -> tuple[str, list[str]]:
    return answer_of(agent, f"{name}.{ZONE}", rdtype)


def until(agent: RunningAgent, name: str, expected: tuple[str, list[str]], rdtype: str = "A",
          within: float = PROPAGATION_BOUND) -> float:
    return until_answer(agent, f"{name}.{ZONE}", expected, rdtype, within)


HEADLESS = "headless.test.svc"
STEPS: list[tuple[str, Any, str, str, tuple[str, list[str]]]] = [
    ("create a ClusterSetIP import",
     lambda api: api.put("ServiceImport", mc.service_import("test", "myservice", ips=["10.42.42.42"],
                                                            ports=[mc.HTTPS])),
     "myservice.test.svc", "A", ("NOERROR", ["10.42.42.42"])),
    ("give it a second, IPv6 clusterset IP",
     lambda api: api.put("ServiceImport", mc.service_import("test", "myservice", ips=["10.42.42.42", "2001:db8::1"],
                                                            ports=[mc.HTTPS])),
     "myservice.test.svc", "AAAA", ("NOERROR", ["2001:db8::1"])),
    ("change its clusterset IP",
     lambda api: api.put("ServiceImport", mc.service_import("test", "myservice", ips=["10.42.42.43"],
                                                            ports=[mc.HTTPS])),
     "myservice.test.svc", "A", ("NOERROR", ["10.42.42.43"])),
    ("create a headless import without slices",
     lambda api: api.put("ServiceImport", mc.service_import("test", "headless", headless=True, ports=[mc.HTTPS])),
     HEADLESS, "A", ("NXDOMAIN", [])),
    ("import a slice from cluster-a",
     lambda api: api.put("EndpointSlice", mc.imported_slice("test", "headless-a", "headless", "cluster-a", "IPv4",
                                                            [mc.ep("10.3.0.1", "my-pet-1")], [mc.HTTPS])),
     HEADLESS, "A", ("NOERROR", ["10.3.0.1"])),
    ("import a slice from cluster-b",
     lambda api: api.put("EndpointSlice", mc.imported_slice("test", "headless-b", "headless", "cluster-b", "IPv4",
                                                            [mc.ep("10.4.0.1", "my-pet-1")], [mc.HTTPS])),
     HEADLESS, "A", ("NOERROR", ["10.3.0.1", "10.4.0.1"])),
    ("address the cluster-b pod by name",
     lambda api: None, f"my-pet-1.cluster-b.{HEADLESS}", "A", ("NOERROR", ["10.4.0.1"])),
    ("mark the cluster-b endpoint not ready",
     lambda api: api.put("EndpointSlice", mc.imported_slice("test", "headless-b", "headless", "cluster-b", "IPv4",
                                                            [mc.ep("10.4.0.1", "my-pet-1", ready=False)],
                                                            [mc.HTTPS])),
     HEADLESS, "A", ("NOERROR", ["10.3.0.1"])),
    ("its name goes with it", lambda api: None, f"my-pet-1.cluster-b.{HEADLESS}", "A", ("NXDOMAIN", [])),
    ("delete the cluster-a slice", lambda api: api.delete("EndpointSlice", "test", "headless-a"),
     HEADLESS, "A", ("NXDOMAIN", [])),
    ("delete the ClusterSetIP import", lambda api: api.delete("ServiceImport", "test", "myservice"),
     "myservice.test.svc", "A", ("NXDOMAIN", [])),
]


def test_service_import_changes_show_up_in_answers_like_services(api: FakeApiServer, kubeconfig: str) -> None:
    with running_agent(live_config(kubeconfig), agent_factory=fast_agent) as agent:
        wait_synced(agent)
        delays = {}
        for what, change, name, rdtype, expected in STEPS:
            change(api)
            delays[what] = until(agent, name, expected, rdtype)
        assert max(delays.values()) < PROPAGATION_BOUND, delays
        requests = api.requests_for("endpointslices", "list")
        assert {r.query.get("labelSelector") for r in requests} == {None, "multicluster.kubernetes.io/service-name"}


def stored_key(name: str) -> bytes:
    """The hot-dict key of the query `answer()` sends for `name` (dnspython, EDNS 1232)."""
    msg = dns.message.make_query(f"{name}.{ZONE}", "A", use_edns=None, payload=1232)
    found = fast_key(msg.to_wire())
    assert found is not None
    return found[0]


def test_an_import_update_drops_only_its_own_stored_answers(api: FakeApiServer, kubeconfig: str) -> None:
    """Targeted invalidation: a changed ServiceImport (or imported slice) changes its answers; the
    other imports' answers stay stored, the very same bytes."""
    api.put("ServiceImport", mc.service_import("test", "one", ips=["10.42.0.1"], ports=[mc.HTTPS]))
    api.put("ServiceImport", mc.service_import("test", "two", ips=["10.42.0.2"], ports=[mc.HTTPS]))
    api.put("ServiceImport", mc.service_import("test", "pets", headless=True, ports=[mc.HTTPS]))
    api.put("EndpointSlice", mc.imported_slice("test", "pets-a", "pets", "cluster-a", "IPv4",
                                               [mc.ep("10.3.0.1", "p-0")], [mc.HTTPS]))
    with running_agent(live_config(kubeconfig), agent_factory=fast_agent) as agent:
        wait_synced(agent)
        names = ["one.test.svc", "two.test.svc", "pets.test.svc", "p-0.cluster-a.pets.test.svc",
                 "cluster-a.pets.test.svc", "nope.test.svc"]
        for name in names:
            answer(agent, name)

        def stored() -> dict[str, bytes | None]:
            table = agent.call(lambda: dict(agent.agent.cluster_answers.hot.view))
            return {name: table.get(stored_key(name)) for name in names}

        kept = stored()
        assert all(kept.values()), kept
        api.put("ServiceImport", mc.service_import("test", "one", ips=["10.42.0.9"], ports=[mc.HTTPS]))
        until(agent, "one.test.svc", ("NOERROR", ["10.42.0.9"]))
        now = stored()
        assert now["one.test.svc"] not in (None, kept["one.test.svc"])
        for name in names[1:]:
            assert now[name] is kept[name], f"{name}: dropped by a change to another import"
        # a slice imported for `pets` drops the answers built from `pets`, and only those
        api.put("EndpointSlice", mc.imported_slice("test", "pets-a", "pets", "cluster-a", "IPv4",
                                                   [mc.ep("10.3.0.2", "p-0")], [mc.HTTPS]))
        wait_for(lambda: stored()["pets.test.svc"] is None, 5.0, "the pets answer to be dropped", interval=0.01)
        now = stored()
        assert now["p-0.cluster-a.pets.test.svc"] is None and now["cluster-a.pets.test.svc"] is None
        assert now["two.test.svc"] is kept["two.test.svc"] and now["nope.test.svc"] is kept["nope.test.svc"]
        assert answer(agent, "pets.test.svc") == ("NOERROR", ["10.3.0.2"])


def records_of(status: dict[str, Any], resource: str) -> dict[str, Any]:
    result: dict[str, Any] = status["sync"]["resources"][resource]
    return result


def test_a_cluster_without_the_crd_syncs_answers_and_logs_once(api: FakeApiServer, kubeconfig: str,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    api.remove_crd("serviceimports")
    api.put("EndpointSlice", mc.imported_slice("test", "pets-a", "pets", "cluster-a", "IPv4",
                                               [mc.ep("10.3.0.1", "p-0")], [mc.HTTPS]))
    caplog.set_level(logging.INFO, logger="nodedns.kube")
    with running_agent(live_config(kubeconfig), agent_factory=fast_agent) as agent:
        wait_synced(agent)  # not held back by the missing CRD
        assert agent.call(agent.agent.ready) == (True, [])
        assert answer(agent, "dns-version", "TXT") == ("NOERROR", ['"1.0.0"'])
        assert answer(agent, "pets.test.svc") == ("NXDOMAIN", [])  # slices without their import: nothing
        wait_for(lambda: len(api.requests_for("serviceimports", "list")) >= 4, 5.0, "a few retries", interval=0.01)
        lines = [r for r in caplog.records if "serviceimports" in r.getMessage() and r.levelno >= logging.WARNING]
        assert len(lines) == 1 and lines[0].levelno == logging.WARNING, [r.getMessage() for r in lines]
        assert "does not serve" in lines[0].getMessage() and "CRD installed" in lines[0].getMessage()
        st = json.loads(get(agent.debug_url + "/status")[2])
        assert records_of(st, "serviceimports")["forbidden"] is True
        assert records_of(st, "serviceimports")["forbidden_code"] == 404
        assert [(c["resource"], c["code"], c["required"]) for c in st["sync"]["conditions"]] == [
            ("serviceimports", 404, False)]
        assert value(samples(agent), "nodedns_sync_resource_forbidden", resource="serviceimports") == 1
        assert get(agent.status_url + "/readyz")[0] == 200
        # the CRD arrives, then an import: picked up by the next retry, no restart
        api.install_crd("serviceimports")
        api.put("ServiceImport", mc.service_import("test", "pets", headless=True, ports=[mc.HTTPS]))
        until(agent, "pets.test.svc", ("NOERROR", ["10.3.0.1"]), within=5.0)
        wait_for(lambda: value(samples(agent), "nodedns_sync_resource_forbidden", resource="serviceimports") == 0,
                 5.0, "the gauge to go back to 0", interval=0.01)
        assert json.loads(get(agent.debug_url + "/status")[2])["sync"]["conditions"] == []
        assert any("lets this agent read it again" in r.getMessage() for r in caplog.records)
        # the CRD is removed again: its objects go with it
        api.remove_crd("serviceimports")
        until(agent, "pets.test.svc", ("NXDOMAIN", []), within=5.0)


def test_a_missing_rbac_grant_degrades_the_same_way_and_keeps_what_was_listed(
        api: FakeApiServer, kubeconfig: str, caplog: pytest.LogCaptureFixture) -> None:
    api.forbid("serviceimports")
    caplog.set_level(logging.WARNING, logger="nodedns.kube")
    with running_agent(live_config(kubeconfig), agent_factory=fast_agent) as agent:
        wait_synced(agent)
        assert agent.call(agent.agent.ready) == (True, [])
        wait_for(lambda: len(api.requests_for("serviceimports", "list")) >= 3, 5.0, "a few retries", interval=0.01)
        lines = [r.getMessage() for r in caplog.records if "serviceimports" in r.getMessage()]
        assert len(lines) == 1 and "forbidden" in lines[0] and "ClusterRole" in lines[0], lines
        assert value(samples(agent), "nodedns_sync_resource_forbidden", resource="serviceimports") == 1
        st = json.loads(get(agent.debug_url + "/status")[2])
        assert records_of(st, "serviceimports")["forbidden_code"] == 403
        api.allow("serviceimports")
        api.put("ServiceImport", mc.service_import("test", "one", ips=["10.42.0.1"]))
        until(agent, "one.test.svc", ("NOERROR", ["10.42.0.1"]), within=5.0)
        # the grant is taken away again: the imports listed stay (the objects still exist)
        api.forbid("serviceimports")
        wait_for(lambda: records_of(json.loads(get(agent.debug_url + "/status")[2]), "serviceimports")["forbidden_code"]
                 == 403, 5.0, "the 403 to be seen", interval=0.01)
        assert answer(agent, "one.test.svc") == ("NOERROR", ["10.42.0.1"])


def test_the_multicluster_watches_exist_only_with_the_flag(api: FakeApiServer, kubeconfig: str) -> None:
    cfg = live_config(kubeconfig)
    del cfg["multicluster-zone"]
    with running_agent(cfg, agent_factory=fast_agent) as agent:
        wait_synced(agent)
        assert "serviceimports" not in agent.call(lambda: agent.agent.source.kube.status()["resources"])  # type:
        # ignore[union-attr]
    assert api.requests_for("serviceimports") == []
    assert all(r.query.get("labelSelector") is None for r in api.requests_for("endpointslices"))


# ----------------------------------------------------------------------------------------------
# The shipped configuration: the DaemonSet's ConfigMap (workers, allow list) and the overlay's flag

COMPONENT = ROOT / "daemonset" / "multicluster"


def overlay_args() -> list[str]:
    """The flags the multicluster overlay adds to the DaemonSet's container."""
    patch = yaml.safe_load((COMPONENT / "daemonset-patch.yaml").read_text())
    return [op["value"] for op in patch if op["op"] == "add" and op["path"].endswith("/args/-")]


def test_the_shipped_config_with_the_overlay_serves_the_clusterset_zone(api: FakeApiServer, kubeconfig: str,
                                                                        tmp_path: Path) -> None:
    """`nodedns serve` as the DaemonSet runs it (its ConfigMap: 2 workers, the default allow list), plus
    the overlay's flag; only the node parts (interface, rules, port 53) are left out here."""
    config = yaml.safe_load(yaml.safe_load((ROOT / "daemonset" / "configmap.yaml").read_text())["data"]
                            ["config.yaml"])
    assert config["workers"] >= 2
    for key in ("setup-interface", "local-ip", "firewall", "upstream-resolv-conf", "status-listen", "debug-listen"):
        config.pop(key, None)
    port = free_port()
    config.update({"listen": f"127.0.0.1:{port}", "status-listen": "none", "debug-listen": "none", "lameduck": "0s"})
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    args = overlay_args()
    assert args == [f"--multicluster-zone={ZONE}"]
    api.put("ServiceImport", mc.service_import("test", "myservice", ips=["10.42.42.42"], ports=[mc.HTTPS]))
    log = tmp_path / "nodedns.log"
    with log.open("w") as out:
        proc = subprocess.Popen(nodedns_cmd("serve", "--config", str(path), "--kubeconfig", kubeconfig, *args),
                                env=subprocess_env(NODE_NAME="node-a"), stdout=out, stderr=subprocess.STDOUT)
    try:
        def ask_import(name: str) -> list[str]:
            try:
                return rrset_values(query("127.0.0.1", port, f"{name}.{ZONE}", timeout=0.3))
            except Exception:  # noqa: BLE001 - not serving yet
                return []

        deadline = time.monotonic() + 30
        while ask_import("myservice.test.svc") != ["10.42.42.42"]:
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the fleet never answered"
            time.sleep(0.05)
        api.put("ServiceImport", mc.service_import("test", "myservice", ips=["10.42.42.44"], ports=[mc.HTTPS]))
        deadline = time.monotonic() + 5
        while not all(ask_import("myservice.test.svc") == ["10.42.42.44"] for _ in range(8)):  # every worker
            assert time.monotonic() < deadline, "a worker kept the old answer"
            time.sleep(0.02)
    finally:
        proc.terminate()
        proc.wait(15)
