"""Who gets answers and how many: the client allow list, the per-client UDP response rate limit, a pace (pure).

`AllowList` (`--allow-from`). With an explicit list, exactly the clients inside it are answered.
Without one, the default admits what can only be this node or its pods:

    loopback (127.0.0.0/8, ::1)          this host
    the agent's own addresses            --local-ip and the listen addresses: a host process (a
                                         hostNetwork pod, the kubelet) asking a local address
                                         sends from that address
    the node's addresses                 InternalIP and ExternalIP of this node's Node object
    the node's pod CIDRs                 spec.podCIDRs of this node's Node object
    a Pod of this node                   a client whose IP is a (non-hostNetwork) Pod on this node
                                         in the index: CNIs that do not allocate from spec.podCIDR

As long as the node's pod CIDR is not known (no Node object for --node-name, or one without
spec.podCIDRs), pods cannot be told from strangers, and the default admits every client ("open";
/status and a warning at start say so); the Node's arrival narrows it. The agent's own loop probes
are never refused (the resolver checks them), so a refused upstream cannot hide a forwarding loop.

The UDP hit path reads one thing: `allowed`, the set of client IPs already admitted (at most
MEMO_SIZE; cleared when full or when the rules change); and, for a client not in it, `policed_hits`:
an admitted client under a DNS policy -> the memo of its policies' group (nodedns.policy.book), the
stored answers it may be given as they are. A client in neither takes the slow path,
where the resolver asks `admit(client)`, which decides and remembers. Refusals are remembered too
(until the index changes, since a new Pod may own the address) so a refused flood costs one set
and one dict lookup per packet before its REFUSED.

`RateLimiter` (`--rate-limit QPS`): responses per second per client IP over UDP, in fixed
one-second windows of the injected clock (a burst may reach 2 x QPS across a window edge). Over
the budget, BIND RRL's default "slip 2": the first, third, ... response over the limit goes out
as TC=1 with the question only (a real resolver retries over TCP, where the source address is
proven), the others are dropped. TCP is not rate-limited (no spoofed sources; bounded by
--tcp-max-connections and the pending cap; its misses meet the miss budget, below). The table
holds the clients of the current second, at most `max_clients`; beyond that new clients share one
budget (the overflow bucket), counted.

Both UDP hit paths (nodedns/serve/_hitpath.c and nodedns/serve/hitpath.py, called by `udp.UDPListener`) count a
client's responses themselves, in `counts`, at one dict lookup and one store per datagram (the C
path: per run of datagrams from one address): each wake-up first calls `tick()` (one clock read:
the window's turn clears `counts` in place, so the dict the hit paths hold stays the limiter's),
then a datagram whose client is under its budget adds one to `counts[client]` and goes on as if
there were no limit. Only a client at its budget (`counts[client] >= rate`), or a new client while
the table is full, is handed to `take`, which counts it and decides slip or drop exactly as for a
query that never met the hit path. So the verdicts are take's, query for query; a window's turn is
seen at the next wake-up (a batch of at most 64 datagrams read at once counts in the window it was
read in).

`MissBudget` (`--miss-limit QPS`, `--miss-limit-namespace QPS`): the answers the slow path builds
(misses: a name not stored, parsed, decided, maybe asked upstream), per client and per namespace of
this node's Pods, per second, budgeted apart from the hits: a hit costs the hit path a few
microseconds, a miss the slow path a hundred times that, so a budget on replies alone let one Pod's
misses take the event loop from every other Pod's cached answers. It is decided where both hit paths
hand over what they did not answer (`udp.UDPListener.general`), after the canonical-key lookup and
before the slow path: a client under both budgets is counted and goes on; one over either is shed
(`take` says SLIP or DROP, counted by reason), its hits still answered. A namespace's budget is its
Pods' together (`namespace_of`: the index, or what the supervisor pushed), so more Pods buy no more.
TCP misses meet the same budgets (`take_tcp`, from `tcp.TCPConnection`, after the same canonical-key
lookup), counted apart from UDP's: over a budget a TCP query is answered REFUSED (a TC=1 means nothing
over TCP, and a stream is no spoofer's), and since a UDP query over its budget is told to ask again
over TCP, what was sent over UDP in a client's name never refuses its TCP retry.

`Capacity`: what a process spends on shedding. Over a budget (the rate limit's or a miss budget) a
UDP query gets a TC=1 reply (the question only, never larger than the query), so a real client asks
again over TCP, where its source address is proven and no UDP budget applies: a spoofer sending in
a victim's name costs the victim a TCP round trip, not its answer. Those replies are bounded too:
at most `rate` a second per process (TC_CAPACITY); beyond that the rest are dropped (the client's
resolver retries after its timeout), so a flood cannot turn the shedding itself into the slow path.

`Pace`: so many turns a second with a burst, for the admin surface (HTTP requests, the explainer's
questions): how long the next one waits for its turn, or None when that is longer than it may wait.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import time
from collections.abc import Callable, Iterable
from typing import Any

from nodedns.cluster.index import Index
from nodedns.names import IPNetwork

log = logging.getLogger("nodedns.limits")

MEMO_SIZE = 65536  # admitted (and refused) client IPs remembered at most
WARN_INTERVAL = 60.0  # seconds between two log lines about refused clients
LOOPBACK: tuple[IPNetwork, ...] = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))
EVERYONE: tuple[IPNetwork, ...] = (ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0"))

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def _address(client: str) -> IPAddress | None:
    try:
        ip = ipaddress.ip_address(client.partition("%")[0])  # an IPv6 zone (fe80::1%eth0) is not part of it
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _networks(texts: Iterable[str]) -> list[IPNetwork]:
    out: list[IPNetwork] = []
    for text in texts:
        try:
            out.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            continue
    return out


class AllowList:
    """Which clients are answered (see the module docstring); `admit` decides, `allowed` remembers."""

    def __init__(
        self,
        *,
        explicit: tuple[IPNetwork, ...] | None,
        own_addresses: Iterable[str] = (),
        index: Index | None = None,
        node_name: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.explicit = explicit
        self.answering = True  # False in `nodedns shadow`: nobody is answered, so an open list warns of nothing
        self.own = tuple(dict.fromkeys(a for a in own_addresses if a not in ("0.0.0.0", "::")))
        self.index = index
        self.node_name = node_name
        self.clock = clock
        self.allowed: set[str] = set()  # read by the UDP hit path: clear in place, never replace
        # clients under a DNS policy (nodedns.policy): never remembered in `allowed`; the hit paths answer them
        # only what their group's memo holds (`policed_hits`)
        self.policed: frozenset[str] = frozenset()
        self._policed_ok: set[str] = set()  # admitted clients under a policy (the resolver's memo, not the hit path's)
        # admitted clients under a policy -> their group's memo (PolicyBook.remember): read by the hit paths,
        # clear in place, never replace
        self.policed_hits: dict[str, dict[bytes, Any]] = {}
        self._refused: dict[str, int] = {}  # client -> index generation when it was refused
        self.networks: list[IPNetwork] = []
        self.open = False
        self.pod_cidrs: tuple[str, ...] = ()
        self._node: object = None
        self.refused = 0  # queries refused
        self.pods_outside_cidr = 0  # clients admitted as Pods of this node outside its pod CIDRs
        self._warned_at = -1e18
        self._warned_open = False
        self.refresh(force=True)

    # -- the rules -------------------------------------------------------------------------

    def refresh(self, *, force: bool = False) -> None:
        """Recompute the default rules when this node's Node record changed (an index listener: O(1)
        unless it did). The warning about an unknown pod CIDR waits for the first full sync."""
        if self.explicit is not None:
            if force:
                self._set(list(self.explicit), open_=False)
            return
        node = self.index.node(self.node_name) if self.index is not None and self.node_name else None
        if node is not self._node or force:
            self._node = node
            cidrs = node.pod_cidrs if node is not None else ()
            own = [n for n in _networks(self.own) if not n.is_loopback]  # loopback is in already
            nets = list(LOOPBACK) + own + (_networks(node.addresses) if node is not None else []) + _networks(cidrs)
            self.pod_cidrs = cidrs
            self._set(nets, open_=not cidrs)
            if cidrs:
                log.info("answering clients from: %s", self.describe())
        if self.open and not self._warned_open and (self.index is None or self.index.synced):
            self._warned_open = True
            if not self.answering:  # a shadow: it judges what would be answered, and answers no client
                log.info("no --allow-from and this node's pod CIDR is unknown: judging as if every client were "
                         "allowed")
                return
            log.warning("no --allow-from and this node's pod CIDR is unknown (%s): answering every client; give "
                        "--allow-from CIDR,... to restrict who may query",
                        "no --node-name" if not self.node_name else
                        f"no Node object named {self.node_name!r}" if node is None else "its Node has no spec.podCIDRs")

    def _set(self, networks: list[IPNetwork], *, open_: bool) -> None:
        self.networks = networks
        self.open = open_
        self.allowed.clear()
        self._refused.clear()
        self._policed_ok.clear()
        self.policed_hits.clear()

    def describe(self) -> str:
        if self.open:
            return "every client (the node's pod CIDR is not known yet)"
        return ", ".join(str(n) for n in self.networks) + ("" if self.explicit is not None else
                                                          ", and the Pods of this node")

    def status(self) -> dict[str, object]:
        return {
            "mode": "explicit" if self.explicit is not None else "open" if self.open else "default",
            "networks": [str(n) for n in self.networks],
            "pod_cidrs": list(self.pod_cidrs),
            "refused": self.refused,
            "admitted_pods_outside_cidr": self.pods_outside_cidr,
            "remembered": len(self.allowed),
        }

    # -- the decision (slow path: the hit path only reads `allowed`) -----------------------

    def admit(self, client: str) -> bool:
        """True when `client` may be answered; remembered either way."""
        if client in self._policed_ok:
            return True
        generation = self.index.generation if self.index is not None else 0
        if self._refused.get(client) == generation:
            return False
        if self.open or self._matches(client):
            self._remember(client)
            return True
        if len(self._refused) >= MEMO_SIZE:
            self._refused.clear()
        self._refused[client] = generation
        return False

    def _matches(self, client: str) -> bool:
        ip = _address(client)
        if ip is None:
            return False
        if any(ip in net for net in self.networks):
            return True
        if self.explicit is None and self._pod_of_this_node(str(ip)):
            self.pods_outside_cidr += 1
            return True
        return False

    def _pod_of_this_node(self, ip: str) -> bool:
        if self.index is None or not self.node_name:
            return False
        return any(p.node_name == self.node_name and not p.host_network for p in self.index.pods_with_ip(ip))

    def set_policed(self, clients: frozenset[str]) -> None:
        """The clients under a DNS policy from now on: forgotten, and never remembered in `allowed` again while
        so (their queries go to the resolver, which asks the policy before any stored answer, unless their
        group's memo holds the answer: `policed_hits`, forgotten too)."""
        self.policed = clients
        self.allowed.difference_update(clients)
        self._policed_ok.clear()
        self.policed_hits.clear()

    def policed_hit(self, client: str, memo: dict[bytes, Any]) -> None:
        """The hit paths may answer `client` (under a DNS policy) what `memo` holds: only once it was admitted."""
        if client in self._policed_ok and self.policed_hits.get(client) is not memo:
            self.policed_hits[client] = memo

    def _remember(self, client: str) -> None:
        if client in self.policed:
            if len(self._policed_ok) >= MEMO_SIZE:
                self._policed_ok.clear()
            self._policed_ok.add(client)
            return
        if len(self.allowed) >= MEMO_SIZE:
            self.allowed.clear()
        self.allowed.add(client)

    def note_refused(self, client: str) -> None:
        """Count a refused query; log one line a minute at most, naming the latest client."""
        self.refused += 1
        now = self.clock()
        if now - self._warned_at >= WARN_INTERVAL:
            self._warned_at = now
            log.warning("refused queries from %s (not in the allow list: %s); %d refused so far",
                        client, self.describe(), self.refused)


TC_CAPACITY = 20_000  # TC=1 replies a second a process sends for queries over a budget; beyond it they are dropped


class Capacity:
    """How many TC=1 replies this second may still be sent for queries over a budget (module docstring):
    `take()` is True for the first `rate` of each one-second window of the injected clock."""

    def __init__(self, rate: int = TC_CAPACITY, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.clock = clock
        self.window_end = -1.0
        self.used = 0
        self.exhausted = 0  # queries dropped because this second's replies were spent

    def take(self) -> bool:
        now = self.clock()
        if now >= self.window_end:
            self.window_end = math.floor(now) + 1.0
            self.used = 0
        if self.used < self.rate:
            self.used += 1
            return True
        self.exhausted += 1
        return False


class RateLimiter:
    """Per-client UDP response budget in one-second windows (see the module docstring). With a
    `capacity`, every reply over the budget is TC=1 while the capacity lasts, dropped beyond it (a
    spoofer cannot cost its victim the answer); without one, every `slip`th is TC=1 (BIND RRL's rule)."""

    PASS = 0
    DROP = 1
    SLIP = 2
    OVERFLOW = ""  # the shared bucket of clients that found the table full

    def __init__(self, rate: int, *, slip: int = 2, max_clients: int = 100_000,
                 clock: Callable[[], float] = time.monotonic, capacity: Capacity | None = None) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive (0 means no limiter at all)")
        self.rate = rate
        self.slip = slip
        self.max_clients = max_clients
        self.clock = clock
        self.capacity = capacity
        self.window_end = -1.0  # the current one-second window ends here
        self.counts: dict[str, int] = {}  # read and written by the UDP hit paths: clear in place, never replace
        self.dropped = 0
        self.slipped = 0
        self.table_full = 0

    def tick(self) -> None:
        """Start a new window when the current one has ended (the hit paths call it once per wake-up)."""
        now = self.clock()
        if now >= self.window_end:
            self.window_end = math.floor(now) + 1.0
            self.counts.clear()

    def take(self, client: str) -> int:
        """Count one response to `client`: PASS, DROP, or SLIP (send it truncated). On the UDP path of
        every query while the limit is on: kept to a clock read and two dict operations."""
        now = self.clock()
        counts = self.counts
        if now >= self.window_end:
            self.window_end = math.floor(now) + 1.0
            counts.clear()
        n = counts.get(client)
        if n is None:
            if len(counts) >= self.max_clients:
                self.table_full += 1
                client = self.OVERFLOW
                n = counts.get(client, 0)
            else:
                n = 0
        n += 1
        counts[client] = n
        if n <= self.rate:
            return 0  # PASS
        capacity = self.capacity
        if capacity is not None:
            slip = capacity.take()
        else:
            slip = bool(self.slip) and (n - self.rate - 1) % self.slip == 0
        if slip:
            self.slipped += 1
            return self.SLIP
        self.dropped += 1
        return self.DROP

    def status(self) -> dict[str, object]:
        return {"qps": self.rate, "slip": "while capacity lasts" if self.capacity is not None else self.slip,
                "dropped": self.dropped, "slipped": self.slipped,
                "clients": len(self.counts), "max_clients": self.max_clients, "table_full": self.table_full}


class MissBudget:
    """Misses per client and per namespace in one-second windows, apart from hits (module docstring): UDP's
    and TCP's counted apart, at the same rates."""

    PASS = RateLimiter.PASS
    DROP = RateLimiter.DROP
    SLIP = RateLimiter.SLIP

    def __init__(self, rate: int, namespace_rate: int, *, capacity: Capacity,
                 namespace_of: Callable[[str], str | None] = lambda _client: None, max_clients: int = 100_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if rate < 0 or namespace_rate < 0 or rate + namespace_rate == 0:
            raise ValueError("a miss budget needs a positive rate per client or per namespace")
        self.rate = rate  # 0: no budget per client
        self.namespace_rate = namespace_rate  # 0: no budget per namespace
        self.capacity = capacity
        self.namespace_of = namespace_of
        self.max_clients = max_clients
        self.clock = clock
        self.window_end = -1.0
        self.counts: dict[str, int] = {}  # client -> UDP misses this second (the overflow bucket "" beyond max_clients)
        self.namespaces: dict[str, int] = {}  # namespace -> its Pods' UDP misses this second
        self.tcp_counts: dict[str, int] = {}  # the same for misses over TCP
        self.tcp_namespaces: dict[str, int] = {}
        self.shed = {"client": 0, "namespace": 0}  # misses shed (UDP and TCP), by the budget they were over
        self.slipped = 0
        self.dropped = 0
        self.refused = 0  # TCP misses shed: REFUSED

    def take(self, client: str) -> int:
        """Count one UDP miss of `client` (a query the slow path would answer): PASS, or, over its budget
        or its namespace's, SLIP (a TC=1 reply) while the capacity lasts, else DROP."""
        over = self._over(client, self.counts, self.namespaces)
        if over is None:
            return self.PASS
        self.shed[over] += 1
        if self.capacity.take():
            self.slipped += 1
            return self.SLIP
        self.dropped += 1
        return self.DROP

    def take_tcp(self, client: str) -> bool:
        """Count one TCP miss of `client`: True (on to the slow path), or False over its budget or its
        namespace's (the caller answers REFUSED: no TC=1 over TCP, and a TCP source is proven, so no
        capacity is spent). Counted apart from the UDP misses: a client's TC=1 retries over TCP are not
        refused for what was sent over UDP in its name."""
        over = self._over(client, self.tcp_counts, self.tcp_namespaces)
        if over is None:
            return True
        self.shed[over] += 1
        self.refused += 1
        return False

    def _over(self, client: str, counts: dict[str, int], namespaces: dict[str, int]) -> str | None:
        """Count one miss of `client` in `counts` and `namespaces` (None), or the budget it is over (uncounted)."""
        now = self.clock()
        if now >= self.window_end:  # a new second: every budget whole again
            self.window_end = math.floor(now) + 1.0
            self.counts.clear()
            self.namespaces.clear()
            self.tcp_counts.clear()
            self.tcp_namespaces.clear()
        n = counts.get(client)
        if n is None:
            if len(counts) >= self.max_clients:
                client = RateLimiter.OVERFLOW
                n = counts.get(client, 0)
            else:
                n = 0
        rate = self.rate
        if rate and n >= rate:
            return "client"
        ns = self.namespace_of(client) if self.namespace_rate else None
        if ns is not None:
            m = namespaces.get(ns, 0)
            if m >= self.namespace_rate:
                return "namespace"
            namespaces[ns] = m + 1
        counts[client] = n + 1
        return None

    def status(self) -> dict[str, object]:
        return {"qps": self.rate, "namespace_qps": self.namespace_rate, "shed": dict(self.shed),
                "slipped": self.slipped, "dropped": self.dropped, "refused": self.refused,
                "clients": len(self.counts) + len(self.tcp_counts),
                "namespaces": len(self.namespaces.keys() | self.tcp_namespaces.keys()),
                "max_clients": self.max_clients}


class Namespaces:
    """Client address -> the namespace of its Pod on this node (None: no such Pod), for the miss budget
    per namespace: read from the index by its owner, from what the supervisor pushed (`apply`) by a
    --workers worker, which holds no index."""

    def __init__(self, index: Index | None, node_name: str = "") -> None:
        self.index = index
        self.node_name = node_name
        self.pushed: dict[str, str] | None = None

    def __call__(self, client: str) -> str | None:
        if self.pushed is not None:
            return self.pushed.get(client)
        if self.index is None:
            return None
        node = self.node_name
        for pod in self.index.pods_with_ip(client):
            if not pod.host_network and (not node or pod.node_name == node):
                return pod.namespace
        return None

    def apply(self, namespaces: dict[str, str]) -> None:
        """What the supervisor pushed: this node's Pod addresses and their namespaces."""
        self.pushed = namespaces


class Pace:
    """`rate` turns a second, `burst` of them at once (GCRA, injected clock): `reserve(max_wait)` is how
    long the next turn waits, or None (and no turn taken) when that would be longer than `max_wait`."""

    def __init__(self, rate: float, burst: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.interval = 1.0 / rate
        self.tolerance = max(burst - 1, 0) * self.interval
        self.clock = clock
        self.tat = 0.0  # theoretical arrival time of the next turn

    def reserve(self, max_wait: float = math.inf) -> float | None:
        now = self.clock()
        tat = max(self.tat, now)
        wait = tat - self.tolerance - now
        if wait > max_wait:
            return None
        self.tat = tat + self.interval
        return max(wait, 0.0)
