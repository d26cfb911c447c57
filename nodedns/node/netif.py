"""The node side: the link-local interface (netlink, pyroute2 only here), the loop reconciling it and the rules,
and the DNS probe of the local IPs (the loop's and `nodedns guard`'s).

`Link` is node-cache's `netif.go` as an idempotent ensure: the link (a dummy, else a bridge with no ports), up,
holding exactly the local IPs as host addresses (/32, /128). A link we did not create is adopted only when it
cannot be anything else's; anything else with that name is refused (`interface_check`), never modified or deleted.

`NodeNetwork` runs the node lifecycle around the DNS listeners: `prepare()` before they bind (a crashed
predecessor's rules removed, the link ensured); `start()` a task that installs the conntrack-bypass rules only
once the listeners serve, the index has synced and the local IPs answer a probe (`poke()` when that may have
changed), then re-ensures link, addresses and rules every `--sync-interval` and looks at the addresses every
second (gone: put back, probed, rules re-installed once answered), and removes the rules should the listeners
die; `teardown()` rules first, then the link. Every netlink and firewall call runs in a worker thread under one
lock; failures are counted by cause in `errors`. The behaviour on a node: docs/node.md "The interface".
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import random
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netlink.rtnl.ifaddrmsg import IFA_F_NODAD

from nodedns.errors import NetifError
from nodedns.names import canonical_ip, is_ipv6

log = logging.getLogger("nodedns.netif")

ALIAS = "nodedns"  # IFLA_IFALIAS of links we create: how we know a portless bridge is ours
WATCH_PERIOD = 1.0  # seconds between looks at the local IPs (cheap); the full reconcile runs every --sync-interval
RETRY = 2.0  # seconds before a round that found us not answering runs again
PROBE_TIMEOUT = 1.0
IFF_UP = 0x1
RT_SCOPE_LINK = 253

Report = tuple[list[str], list[NetifError]]


def _refused(err: NetifError) -> bool:
    """A failure for lack of privilege: the firewall's `permission` cause, or netlink's EPERM/EACCES."""
    return err.cause == NetifError.PERMISSION or err.reason.endswith(
        (f"(errno {errno.EPERM})", f"(errno {errno.EACCES})"))


def _why(exc: BaseException) -> str:
    if isinstance(exc, NetlinkError):
        return f"{exc.args[1] if len(exc.args) > 1 else 'netlink error'} (errno {exc.code})"
    return f"{exc.__class__.__name__}: {exc}"


def _summary(items: list[str]) -> str:
    """`table inet nodedns (24 rules)` as is; many iptables rules as their count."""
    if len(items) == 1:
        return items[0]
    return f"{len(items)} rules" if items else "none"


class Link:
    """The interface `name` holding `ips` as host addresses, managed over netlink (blocking calls)."""

    def __init__(self, name: str, ips: Sequence[str], *, netns: str | None = None) -> None:
        self.name = name
        self.ips = tuple(ips)
        self.netns = netns
        self.kind: str | None = None
        self._warned_fallback = False

    def _ipr(self) -> IPRoute:
        return IPRoute(netns=self.netns) if self.netns else IPRoute()

    @staticmethod
    def _want(ip: str) -> tuple[str, int]:
        return ip, 128 if is_ipv6(ip) else 32

    def _lookup(self, ipr: Any) -> Any | None:
        found = ipr.link("dump", ifname=self.name)
        return found[0] if found else None

    def _owned(self, ipr: Any, msg: Any) -> tuple[bool, str]:
        kind = msg.get(("linkinfo", "kind")) or "unknown"
        if kind == "dummy":
            return True, kind
        if kind == "bridge":
            ports = ipr.link("dump", master=msg["index"])
            if not ports and msg.get("ifalias") == ALIAS:
                return True, kind
            why = f"{len(ports)} ports" if ports else f"no alias {ALIAS!r}"
            return False, f"a bridge we did not create ({why})"
        return False, f"a {kind} link"

    def _create(self, ipr: Any) -> str:
        try:
            ipr.link("add", ifname=self.name, kind="dummy")
            return "dummy"
        except NetlinkError as exc:
            if exc.code in (errno.EEXIST, errno.EPERM, errno.EACCES):
                raise  # there already, or not ours to make (no NET_ADMIN): a bridge would not do either
            if not self._warned_fallback:
                log.warning("link kind dummy is not available here (%s); using a bridge with no ports for %s",
                            _why(exc), self.name)
                self._warned_fallback = True
        ipr.link("add", ifname=self.name, kind="bridge")
        return "bridge"

    def ensure(self) -> Report:
        """Create the link if missing, bring it up, add missing addresses, drop addresses not ours."""
        actions: list[str] = []
        errors: list[NetifError] = []
        with self._ipr() as ipr:
            try:
                msg = self._lookup(ipr)
            except (NetlinkError, OSError) as exc:
                return actions, [NetifError("interface_check", f"looking up {self.name}: {_why(exc)}")]
            if msg is None:
                try:
                    kind = self._create(ipr)
                    msg = self._lookup(ipr)
                    if msg is None:
                        raise NetifError("interface_add", f"{self.name} vanished right after it was created")
                    ipr.link("set", index=msg["index"], ifalias=ALIAS)
                except (NetlinkError, OSError) as exc:
                    return actions, [NetifError("interface_add", f"adding {self.name}: {_why(exc)}")]
                except NetifError as exc:
                    return actions, [exc]
                actions.append(f"added interface {self.name} (kind {kind})")
            else:
                owned, kind = self._owned(ipr, msg)
                if not owned:
                    return actions, [NetifError("interface_check",
                                                f"{self.name} is {kind}; refusing to manage it")]
            self.kind = kind
            index = msg["index"]
            if not msg["flags"] & IFF_UP:
                try:
                    ipr.link("set", index=index, state="up")
                    actions.append(f"set {self.name} up")
                except (NetlinkError, OSError) as exc:
                    errors.append(NetifError("interface_check", f"setting {self.name} up: {_why(exc)}"))
            self._ensure_addresses(ipr, index, actions, errors)
        return actions, errors

    def _current(self, ipr: Any, index: int) -> set[tuple[str, int]]:
        have: set[tuple[str, int]] = set()
        for a in ipr.get_addr(index=index):
            if a["scope"] == RT_SCOPE_LINK:
                continue  # the kernel's own fe80:: address on an up link
            ip = canonical_ip(str(a.get("local") or a.get("address") or ""))
            if ip is not None:
                have.add((ip, int(a["prefixlen"])))
        return have

    def _ensure_addresses(self, ipr: Any, index: int, actions: list[str], errors: list[NetifError]) -> None:
        want = {self._want(ip) for ip in self.ips}
        try:
            have = self._current(ipr, index)
        except (NetlinkError, OSError) as exc:
            errors.append(NetifError("interface_check", f"listing addresses of {self.name}: {_why(exc)}"))
            return
        for ip, plen in sorted(want - have):
            try:
                extra = {"flags": IFA_F_NODAD} if plen == 128 else {}
                ipr.addr("add", index=index, address=ip, prefixlen=plen, **extra)
                actions.append(f"added address {ip}/{plen} to {self.name}")
            except NetlinkError as exc:
                if exc.code != errno.EEXIST:
                    errors.append(NetifError("address_add", f"adding {ip}/{plen} to {self.name}: {_why(exc)}"))
            except OSError as exc:
                errors.append(NetifError("address_add", f"adding {ip}/{plen} to {self.name}: {_why(exc)}"))
        for ip, plen in sorted(have - want):
            try:
                ipr.addr("del", index=index, address=ip, prefixlen=plen)
                actions.append(f"removed stale address {ip}/{plen} from {self.name}")
            except (NetlinkError, OSError) as exc:
                errors.append(NetifError("address_remove", f"removing {ip}/{plen} from {self.name}: {_why(exc)}"))

    def elsewhere(self) -> list[tuple[str, str]]:
        """(local IP, interface) for each of our local IPs that another link holds too (kube-ipvs0, say)."""
        want = {canonical_ip(ip) for ip in self.ips}
        out: list[tuple[str, str]] = []
        with self._ipr() as ipr:
            names = {msg["index"]: msg.get("ifname") for msg in ipr.get_links()}
            for a in ipr.get_addr():
                ip = canonical_ip(str(a.get("local") or a.get("address") or ""))
                name = str(names.get(a["index"], a["index"]))
                if ip is not None and ip in want and name != self.name:
                    out.append((ip, name))
        return sorted(out)

    def missing(self) -> list[str]:
        """The local IPs not on the link right now (all of them when the link is gone): one netlink dump."""
        with self._ipr() as ipr:
            msg = self._lookup(ipr)
            if msg is None:
                return list(self.ips)
            have = {ip for ip, _ in self._current(ipr, msg["index"])}
        return [ip for ip in self.ips if canonical_ip(ip) not in have]

    def _ours(self, ipr: Any, doing: str) -> tuple[Any, list[NetifError]]:
        """The link's message when it exists and is ours; else None and what to report (nothing when the link
        is absent, an `interface_check` error when it is someone else's)."""
        msg = self._lookup(ipr)
        if msg is None:
            return None, []
        owned, kind = self._owned(ipr, msg)
        if not owned:
            return None, [NetifError("interface_check", f"{self.name} is {kind}; not {doing} it")]
        return msg, []

    def remove_addresses(self) -> Report:
        """Take the local IPs off the link, which stays (`nodedns guard`: the agent's listeners keep their
        sockets, and its reconcile loop puts the addresses back once it answers). Only from a link of ours."""
        actions: list[str] = []
        errors: list[NetifError] = []
        with self._ipr() as ipr:
            try:
                msg, refused = self._ours(ipr, "touching")
                if msg is None:
                    return [], refused
                have = self._current(ipr, msg["index"])
            except (NetlinkError, OSError) as exc:
                return [], [NetifError("interface_check", f"looking up {self.name}: {_why(exc)}")]
            for ip, plen in sorted(have & {self._want(ip) for ip in self.ips}):
                try:
                    ipr.addr("del", index=msg["index"], address=ip, prefixlen=plen)
                    actions.append(f"removed address {ip}/{plen} from {self.name}")
                except NetlinkError as exc:
                    if exc.code != errno.EADDRNOTAVAIL:  # gone meanwhile
                        errors.append(NetifError("address_remove", f"removing {ip}/{plen} from {self.name}: "
                                                                   f"{_why(exc)}"))
                except OSError as exc:
                    errors.append(NetifError("address_remove", f"removing {ip}/{plen} from {self.name}: {_why(exc)}"))
        return actions, errors

    def remove(self) -> Report:
        """Delete the link (its addresses go with it) when it exists and is ours."""
        with self._ipr() as ipr:
            try:
                msg, refused = self._ours(ipr, "deleting")
                if msg is None:
                    return [], refused
                ipr.link("del", index=msg["index"])
            except (NetlinkError, OSError) as exc:
                return [], [NetifError("interface_remove", f"deleting {self.name}: {_why(exc)}")]
        return [f"deleted interface {self.name}"], []

    def describe(self) -> dict[str, Any]:
        """What is there now: exists, kind, up, addresses."""
        with self._ipr() as ipr:
            msg = self._lookup(ipr)
            if msg is None:
                return {"name": self.name, "exists": False}
            addrs = sorted(f"{ip}/{plen}" for ip, plen in self._current(ipr, msg["index"]))
            return {"name": self.name, "exists": True, "kind": msg.get(("linkinfo", "kind")),
                    "up": bool(msg["flags"] & IFF_UP), "addresses": addrs}


# ----------------------------------------------------------------------------------------------
# Asking a local IP for an answer (the reconcile loop before it captures, `nodedns guard` always)

QTYPE_TXT = 16
_RCODE_NAMES = {1: "FORMERR", 2: "SERVFAIL", 4: "NOTIMP", 5: "REFUSED"}
HostPort = tuple[str, int]


IF_INET6 = "/proc/net/if_inet6"  # the kernel's IPv6 addresses: address, ifindex, prefix, scope, flags, name


def global_ipv6(path: str = IF_INET6) -> list[str]:
    """The host's IPv6 addresses of global scope (not loopback, link-local or site-local), canonical text;
    none when IPv6 is off (no such file). Blocking (a /proc read): call it from a thread."""
    try:
        with open(path, encoding="ascii") as fh:
            lines = fh.read().splitlines()
    except FileNotFoundError:
        return []
    out: list[str] = []
    for line in lines:
        fields = line.split()
        if len(fields) < 6 or fields[3] != "00" or len(fields[0]) != 32:
            continue
        ip = canonical_ip(":".join(fields[0][i : i + 4] for i in range(0, 32, 4)))
        if ip is not None:
            out.append(ip)
    return out


def probe_query(qname: str, qid: int, qtype: int = QTYPE_TXT) -> tuple[bytes, bytes]:
    """A plain query (RD) for `qname`, and its question section. Built by hand, so `nodedns guard` needs no
    DNS library (it stays small); `dns-version.<zone>` TXT is the usual name."""
    question = b"".join(len(label).to_bytes(1, "big") + label for label in
                        (part.encode("ascii") for part in qname.strip(".").split(".") if part))
    question += b"\x00" + struct.pack("!HH", qtype, 1)
    return struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + question, question


def probe_reply(data: bytes, qid: int, question: bytes) -> str | None:
    """None when `data` is our answer (our ID, QR, our question) with NOERROR or NXDOMAIN; else why not."""
    n = len(question)
    if len(data) < 12 + n or data[2] & 0x80 == 0 or struct.unpack("!H", data[:2])[0] != qid:
        return "not an answer to the probe"
    if data[12:12 + n].lower() != question.lower():
        return "an answer to another question"
    rcode = data[3] & 0x0F
    return None if rcode in (0, 3) else f"answered {_RCODE_NAMES.get(rcode, f'rcode {rcode}')}"


async def probe(host: str, port: int, qname: str, *, wait: float) -> str | None:
    """Ask (host, port) over UDP: None when it answers `qname` (NOERROR or NXDOMAIN) within `wait` seconds; else
    why not. The socket is connected, so "nothing listens there" (ICMP port unreachable) fails at once."""
    loop = asyncio.get_running_loop()
    qid = random.getrandbits(16)
    msg, question = probe_query(qname, qid)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
    sock.setblocking(False)
    try:
        async with asyncio.timeout(wait):
            await loop.sock_connect(sock, (host, port))
            await loop.sock_sendall(sock, msg)
            while True:
                why = probe_reply(await loop.sock_recv(sock, 4096), qid, question)
                if why is None or why.startswith("answered"):
                    return why
    except TimeoutError:
        return f"no answer in {wait:g}s"
    except ConnectionRefusedError:
        return "refused: nothing listens there"
    except OSError as exc:
        return exc.strerror or str(exc)
    finally:
        sock.close()


async def probe_all(targets: Sequence[HostPort], qname: str, *, wait: float) -> list[tuple[HostPort, str]]:
    """Probe every target at once: the ones that did not answer, with why."""
    results = await asyncio.gather(*(probe(h, p, qname, wait=wait) for h, p in targets))
    return [(t, why) for t, why in zip(targets, results, strict=True) if why is not None]


def where(target: HostPort) -> str:
    host, port = target
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Firewall(Protocol):
    """What NodeNetwork needs from a conntrack-bypass backend (nodedns.node.firewall.*Firewall)."""

    kind: str

    def ensure(self) -> Report: ...

    def remove(self, *, retry: bool = True) -> Report: ...

    def installed(self) -> int: ...


class NodeNetwork:
    """Link + rules: ensured at start, reconciled on a timer, torn down on a clean stop."""

    def __init__(
        self,
        *,
        link: Link | None,
        firewall: Firewall | None,
        sync_interval: float = 60.0,
        skip_teardown: bool = False,
        clock: Callable[[], float] = time.monotonic,
        probe_targets: Sequence[HostPort] = (),
        probe_name: str = "dns-version.cluster.local",
        watch_period: float = WATCH_PERIOD,
    ) -> None:
        self.link = link
        self.firewall = firewall
        self.sync_interval = sync_interval
        self.skip_teardown = skip_teardown
        self.clock = clock
        self.probe_targets = tuple(probe_targets)  # asked before the rules go (back) in: we must answer there
        self.probe_name = probe_name
        self.watch_period = watch_period
        self.taken_away = 0  # times the local IPs were found gone between two rounds (nodedns guard, an operator)
        self.elsewhere: list[tuple[str, str]] = []  # our local IPs that another interface holds too
        self.unanswered = ""  # why the last probe before capturing failed ("" when it did not)
        self.held = ""  # why the local IPs and rules are not put back now ("" when nothing holds them)
        self.hold: Callable[[], str | None] = lambda: None
        self.errors: Counter[str] = Counter()  # cause -> failures
        self.last_error: dict[str, str] = {}  # cause -> latest message
        self.added_back = 0  # rules or link parts re-added by the reconcile loop after the first setup
        self.interface_ok: bool | None = None  # None: not tried yet
        self.link_state: dict[str, Any] = {}  # what netlink showed after the latest ensure
        self.rules_installed = False
        self._link_errors: list[NetifError] = []  # what the latest ensure of the link failed with
        self.reconciles = 0
        self.last_reconcile: float | None = None
        self._lock = threading.Lock()  # one netlink/firewall step at a time, across worker threads
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    # -- blocking steps (worker thread) ----------------------------------------------------

    def _record(self, report: Report) -> list[str]:
        """Count the failures by cause and log them, one line per cause; return the changes."""
        actions, errors = report
        by_cause: dict[str, list[str]] = {}
        for err in errors:
            self.errors[err.cause] += 1
            self.last_error[err.cause] = err.reason
            by_cause.setdefault(err.cause, []).append(err.reason)
        for cause, reasons in by_cause.items():
            more = f" (and {len(reasons) - 1} more like it)" if len(reasons) > 1 else ""
            log.error("node setup failed (%s): %s%s", cause, reasons[0], more)
        return actions

    def _ensure_link(self) -> None:
        if self.link is None:
            return
        first = self.interface_ok is not True  # never fully set up yet: this is the initial setup
        actions, errors = self.link.ensure()
        self._link_errors = errors
        self._record(([], errors))
        self.interface_ok = not errors
        try:
            self.link_state = self.link.describe()
        except (NetlinkError, OSError) as exc:
            self.link_state = {"name": self.link.name, "error": _why(exc)}
        self._changed(actions, first=first, first_level=logging.INFO, again="added back: %s")

    def _changed(self, changes: list[str], *, first: bool, first_level: int, again: str) -> None:
        """Log what an ensure changed; after the initial setup each change is an "added back", counted."""
        for change in changes:
            if first:
                log.log(first_level, "%s", change)
            else:
                self.added_back += 1
                log.warning(again, change)

    def prepare_sync(self, clean: bool = True) -> None:
        """Raises NetifError (cause `permission`) when netlink or the firewall refuse us for lack of
        privilege: that never passes by itself, so the start fails with it (exit 1)."""
        with self._lock:
            refused: list[NetifError] = []
            if self.firewall is not None and not self.skip_teardown and clean:
                removed, errors = self.firewall.remove()
                refused.extend(e for e in errors if _refused(e))
                self._record((removed, errors))
                if removed:
                    log.warning("removed conntrack-bypass rules left by a previous run: %s", _summary(removed))
            self._ensure_link()
            refused.extend(e for e in self._link_errors if _refused(e))
            if refused:
                first = refused[0].reason.removesuffix(f" ({NetifError.NO_NET_ADMIN})")
                raise NetifError(NetifError.PERMISSION, f"{first}: {NetifError.NO_NET_ADMIN} (netlink for the "
                                                        "interface and its addresses, iptables/nft for the rules)")
            self._check_elsewhere()

    def _check_elsewhere(self) -> None:
        """Say so when another interface holds one of our local IPs: kube-ipvs0 means kube-proxy runs in IPVS
        mode, where IPVS takes a Service's ClusterIP before any socket sees it."""
        if self.link is None:
            return
        try:
            self.elsewhere = self.link.elsewhere()
        except (NetlinkError, OSError) as exc:
            log.debug("cannot list the node's addresses: %s", _why(exc))
            return
        for ip, name in self.elsewhere:
            if name == "kube-ipvs0":
                log.warning("local IP %s is also on kube-ipvs0: kube-proxy runs in IPVS mode, where IPVS takes the "
                            "queries to a Service ClusterIP before this agent's socket sees them (they reach the "
                            "cluster DNS, uncached), and removing our address gives no fallback. In IPVS mode use "
                            "local-ip 169.254.20.10 alone and kubelet --cluster-dns 169.254.20.10 (docs/node.md "
                            "\"kube-proxy modes\")", ip)
            else:
                log.warning("local IP %s is also on interface %s: queries to it may not reach this agent", ip, name)

    def lost_addresses(self) -> list[str]:
        """The local IPs missing from the link now (cheap: one netlink dump, meant for every watch period)."""
        if self.link is None:
            return []
        with self._lock:
            if self._closing:
                return []
            return self.link.missing()

    def reconcile_sync(self, capture: bool, why: str = "the DNS listeners are not serving") -> None:
        with self._lock:
            if self._closing:
                return
            first_rules = not self.rules_installed
            self._ensure_link()
            self.reconciles += 1
            self.last_reconcile = self.clock()
            if self.firewall is None:
                return
            if capture and self.interface_ok is not False:
                added, errors = self.firewall.ensure()
                self._record(([], errors))
                self._changed(added, first=first_rules, first_level=logging.DEBUG, again="added back nodedns rule: %s")
                if first_rules and added:
                    log.info("conntrack-bypass rules installed: %s", _summary(added))
                self.rules_installed = self.rules_installed or not errors
            elif self.rules_installed:
                why = "the interface is not set up" if capture else why
                log.error("removing conntrack-bypass rules: %s", why)
                self._record(self.firewall.remove())
                self.rules_installed = False

    def teardown_sync(self, *, retry: bool = True, keep: bool = False, keep_link: str = "") -> None:
        """Remove the rules, then the link; `keep`: neither (another agent of the roster uses them);
        `keep_link`: the rules only, the link is left to whom it names (another DNS server on the local IPs)."""
        with self._lock:
            self._closing = True
            if self.skip_teardown:
                log.info("skip-teardown: leaving interface and rules in place")
                return
            if keep:
                return  # another agent on the node still uses them (the caller said whom)
            if self.firewall is not None:
                removed = self._record(self.firewall.remove(retry=retry))
                self.rules_installed = False
                log.info("removed conntrack-bypass rules: %s", _summary(removed))
            if self.link is not None and keep_link:
                log.info("leaving interface %s and its addresses to %s", self.link.name, keep_link)
            elif self.link is not None:
                for action in self._record(self.link.remove()):
                    log.info("%s", action)

    # -- async API (event loop) ------------------------------------------------------------

    async def prepare(self, *, clean: bool = True) -> None:
        """Before the listeners bind: clean a crashed predecessor's rules (unless `clean` is off: a live
        predecessor still uses them), ensure the link and addresses."""
        await asyncio.to_thread(self.prepare_sync, clean)

    def start(self, can_capture: Callable[[], bool], hold: Callable[[], str | None] = lambda: None) -> None:
        """Start the reconcile loop; `can_capture()` says the listeners serve and the index has synced;
        `hold()`, when it names a reason, keeps the local IPs and rules from being put back (or installed)
        however the probe goes (a --workers agent: a worker is silent, its sockets swallow queries)."""
        self.hold = hold
        self._task = asyncio.get_running_loop().create_task(self._run(can_capture), name="node-reconcile")
        self._task.add_done_callback(self._task_done)

    @staticmethod
    def _task_done(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("node reconcile loop died", exc_info=task.exception())

    def poke(self) -> None:
        """Something `can_capture` depends on may have changed (e.g. the index synced): look again."""
        self._wake.set()

    async def _run(self, can_capture: Callable[[], bool]) -> None:
        while not can_capture():
            self._wake.clear()
            await self._wake.wait()
        due = 0.0
        while True:
            try:
                lost = await asyncio.to_thread(self.lost_addresses)
                if lost and self.interface_ok:
                    self.taken_away += 1
                    log.warning("local IPs %s are gone from %s (nodedns guard fell back to the cluster DNS, or "
                                "someone removed them): putting them back once we answer", ", ".join(lost),
                                self.link.name if self.link is not None else "the interface")
                held = self.hold() if lost or not self.rules_installed else None
                if held is not None:
                    if held != self.held:
                        log.warning("not putting the local IPs and rules back: %s", held)
                    self.held = held
                elif lost or self.clock() >= due:
                    if self.held:
                        log.info("every worker is heard from again: putting the local IPs and rules back once "
                                 "we answer")
                    self.held = ""
                    answered = await self._reconcile(can_capture(), recheck=bool(lost))
                    due = self.clock() + (self.sync_interval if answered else min(self.sync_interval, RETRY))
            except Exception as exc:  # noqa: BLE001 - a bug in one round must not end the loop
                log.error("node reconcile failed", exc_info=exc)
            await asyncio.sleep(min(self.watch_period, self.sync_interval))

    async def _reconcile(self, capture: bool, *, recheck: bool) -> bool:
        """One round. Before the rules go in (or back in after the local IPs were taken away), ask the local
        IPs for an answer: never capture traffic for a process that does not answer. False: it did not."""
        if not (capture and self.firewall is not None and self.probe_targets and (recheck or not self.rules_installed)):
            await asyncio.to_thread(self.reconcile_sync, capture)
            return True
        await asyncio.to_thread(self._ensure_link_locked)  # the addresses first: the probe goes to them
        why = await self._answers()
        if why is not None:
            if why != self.unanswered:
                log.warning("not installing the conntrack-bypass rules: %s; asking again in %gs", why,
                            min(self.sync_interval, RETRY))
            self.unanswered = why
            await asyncio.to_thread(self.reconcile_sync, False, f"we do not answer on the local IPs ({why})")
            return False
        if self.unanswered:
            log.info("the local IPs answer again: installing the conntrack-bypass rules")
        self.unanswered = ""
        await asyncio.to_thread(self.reconcile_sync, True)
        return True

    def _ensure_link_locked(self) -> None:
        with self._lock:
            if not self._closing:
                self._ensure_link()

    async def _answers(self, attempts: int = 3) -> str | None:
        """None once every probe target answers (a few tries: a lost datagram is not a dead agent); else why not."""
        failed: list[tuple[HostPort, str]] = []
        for _ in range(attempts):
            failed = await probe_all(self.probe_targets, self.probe_name, wait=PROBE_TIMEOUT)
            if not failed:
                return None
        return "; ".join(f"{where(t)}: {why}" for t, why in failed)

    async def teardown(self, *, retry: bool = True, keep: bool = False, keep_link: str = "") -> None:
        """Stop the loop, then remove the rules and the link (unless skip-teardown, or `keep`: another
        agent on the node still uses them; `keep_link`: the link is left to whom it names)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        try:
            await asyncio.to_thread(self.teardown_sync, retry=retry, keep=keep, keep_link=keep_link)
        except Exception as exc:  # noqa: BLE001 - shutdown is best effort: the listeners must still close
            log.error("node teardown failed", exc_info=exc)

    # -- state for readiness and /status ---------------------------------------------------

    def problems(self) -> list[str]:
        """Why the node side cannot serve (empty when it can): readiness reasons."""
        if self.link is not None and self.interface_ok is False:
            detail = self.last_error.get("interface_add") or self.last_error.get("interface_check") \
                or self.last_error.get("address_add") or "see the log"
            return [f"interface {self.link.name} is not set up: {detail}"]
        if self.held:
            return [f"the local IPs and rules are not put back while {self.held}"]
        if self.unanswered:
            return [f"no answer on the local IPs, so no conntrack-bypass rules: {self.unanswered}"]
        if self.firewall is not None and not self.rules_installed and NetifError.PERMISSION in self.last_error:
            return [f"no conntrack-bypass rules: {self.last_error[NetifError.PERMISSION]}"]
        return []

    def state(self) -> dict[str, Any]:
        """JSON-able node state for the status endpoint."""
        out: dict[str, Any] = {
            "interface": None,
            "firewall": self.firewall.kind if self.firewall is not None else "none",
            "rules_installed": self.rules_installed,
            "setup_errors": dict(self.errors),
            "last_errors": dict(self.last_error),
            "added_back": self.added_back,
            "reconciles": self.reconciles,
            "seconds_since_reconcile": None if self.last_reconcile is None
            else round(self.clock() - self.last_reconcile, 3),
            "skip_teardown": self.skip_teardown,
            "taken_away": self.taken_away,
            "local_ips_elsewhere": [{"ip": ip, "interface": name} for ip, name in self.elsewhere],
            "unanswered": self.unanswered or None,
            "held": self.held or None,
        }
        if self.link is not None:
            out["interface"] = {"name": self.link.name, "ok": self.interface_ok,
                                "want": [f"{ip}/{plen}" for ip, plen in map(Link._want, self.link.ips)],
                                "seen": self.link_state}
        return out
