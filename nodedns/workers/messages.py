"""The worker protocol: every message between the supervisor and a worker, typed, and the dispatch table of a side.

Each worker has a socketpair to the supervisor that carries length-prefixed pickles of these messages
(nodedns.workers.channel; only between the supervisor and the processes it spawned). A worker reads
`Start` first, blocking (worker_main), then each side hands what it reads to its one `Dispatch` table
(message type -> handler):

    to a worker          Start(config, number, defer, cache_bytes)  the first message: the agent's
                                               config, the worker's number, whether it binds only once
                                               synced, its share of --cache-max-bytes
                         Answers([(key, Reply, keep)])  the owner's decisions for the cluster/reverse
                                               names of one ask (nodedns.serve.resolver: FORWARD, ANSWER,
                                               BEFORE_SYNC, CHASE); keep: false before the first sync
                                               (used, not kept: no tags are sent for the changes of
                                               the first list)
                         Names(State)          what exists (nodedns.cluster.existence), before the
                                               invalidations of the same flush
                         Invalidate(tags | None)  these tags changed (None: everything): drop their answers
                         Synced()              the index has synced
                         Allow(networks, open, pod_cidrs, pod_ips)  the default allow list's inputs
                                               (networks, open, pod CIDRs, the IPs of this node's Pods)
                         Plans(plans, namespaces)  autopath: client IP -> Plan, walk-eligible namespaces
                         Who(gens)             insight: Pod address -> generation (tally.Tally.gens)
                         Tenants(namespaces)   this node's Pod addresses -> their namespace, for the
                                               shares per namespace (limits.Namespaces)
                         FilterAaaa(active, reason)  --filter-aaaa auto, as the owner decided it
                         Policies(clients)     DNS policies: client address -> the policies that apply
                                               (nodedns.policy.book.Applied), on every change
                         Retire(forced)        leave the addresses (drain, unless forced), exit 0
                         Reload()              re-read the upstream files (the supervisor's SIGHUP)
                         Warm(parts)           a hand-over: the running agent's forward caches and EDNS
                                               memory (nodedns.node.handover), before Synced
                         Export()              a newer agent joined: send your forward cache
                         Hosts(size, reloads)  --hosts: the table the supervisor built, its memfd
                                               passed on the table socket (mapped read-only)
    to the supervisor    State(bound, synced, live, heavy_imports)  on every change
                         Beat()                its event loop runs: every HEARTBEAT_PERIOD
                         Ask([key])            the cluster-zone and reverse misses of one event loop
                                               turn, as cache keys (one in flight per key; the owner
                                               reads a key by hand: keys.key_query)
                         Counters(Scrape)      its counters, once a second (and a last time on exit)
                         InsightRows(rows)     its answers by client since the last ones (tally.Row),
                                               once a second and before it takes a new Who
                         Warm(parts)           its forward cache and EDNS memory, for an Export
                         Fatal(code, text)     the error it exits with (the supervisor prints it once)

A message of a type the receiving side has no handler for (another version's, or not a message) is
logged and ignored; bytes that do not unpickle close the channel (nodedns.workers.channel).

Exactness: the supervisor computes a reply from its index at once and writes it on the worker's
stream; every invalidation for a later change is written after it on the same stream, and the
worker keeps a reply the moment it reads it (`ClusterReplies.keep`), before reading what follows. So a
worker never keeps an answer past a change of what it was built from. Invalidations of one event
loop turn go out as one message (and before any reply computed after them).

Why the allow list and autopath are pushed, not asked: both are read for many queries (a client's
first query, every walk-eligible name) and depend on a few hundred objects at most (this node's Node
and Pods), so a worker decides them locally from data the supervisor sends when it changes; only
what needs the whole index (cluster answers) is asked.

Insight, split the same way: the workers see the queries, the supervisor knows the Pods. A worker
counts its answers by client address (`tally.Tally`: one dict increment per hit, no Pod lookup) and
tags them with the Pod generation the supervisor's map gives the address; the supervisor forms
that map from its index (`insight.Insight.refresh`) and pushes it when it changes, and a worker
hands on what it counted under the old map before it takes the new one. So a Pod that takes over
another's address never shares its figures, however late the worker reports, and the supervisor
never has to ask who had an address when. The rows (one per client, name, type and rcode per
second, bounded by `tally`'s caps) come once a second; the supervisor holds every Pod's figures,
sketches and advice (`insight.Insight`), and the search-list misses are told there, where the
queries of one lookup meet again after the kernel spread them over the workers.

Messages are frozen slotted dataclasses: they compare by type and value (the supervisor sends derived
data only when it differs from what it sent last) and pickle as any dataclass; on the channel each goes
as its code (`CODED`) and the tuple of its values, as compact as the tagged tuples they replace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from nodedns.cluster.existence import State as NamesState
from nodedns.config import Config
from nodedns.metrics.counters import Scrape
from nodedns.podconf.searchpath import Plan
from nodedns.policy.book import Applied
from nodedns.serve.answers import Reply
from nodedns.serve.tally import Row

HEARTBEAT_PERIOD = 0.25  # seconds between two heartbeats (Beat) of a worker's event loop

# An answer to one asked key: (key, the owner's reply, whether the worker keeps it)
Answer = tuple[bytes, Reply, bool]


# -- to a worker ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Start:
    """The first message on a worker's channel (read before its event loop runs)."""

    config: Config
    number: int
    defer: bool  # bind only once the index has synced (a predecessor or siblings serve)
    cache_bytes: int  # its share of --cache-max-bytes


@dataclass(frozen=True, slots=True)
class Answers:
    """The owner's replies to one Ask, in its order (a key it could not read is left out)."""

    answers: list[Answer]


@dataclass(frozen=True, slots=True)
class Names:
    """What exists (an update, or the whole of it for a new worker)."""

    state: NamesState


@dataclass(frozen=True, slots=True)
class Invalidate:
    """The tags the index changes of one event loop turn touched; None: everything."""

    tags: frozenset[str] | None


@dataclass(frozen=True, slots=True)
class Synced:
    """The index has synced (after the warm cache, when there is one)."""


@dataclass(frozen=True, slots=True)
class Allow:
    """The default allow list's inputs as the supervisor has them (with no explicit --allow-from)."""

    networks: tuple[str, ...]
    open: bool
    pod_cidrs: tuple[str, ...]
    pod_ips: frozenset[str]  # of this node's Pods (not host-network)


@dataclass(frozen=True, slots=True)
class Plans:
    """Autopath as the supervisor decides it: each client IP's plan, the walk-eligible namespaces."""

    plans: dict[str, Plan]
    namespaces: frozenset[str]


@dataclass(frozen=True, slots=True)
class Who:
    """Insight: Pod address -> generation (the map a worker tags its counts with)."""

    gens: dict[str, int]


@dataclass(frozen=True, slots=True)
class Tenants:
    """This node's Pod addresses -> their namespace (pushed.pod_namespaces): the upstream share and the miss
    budget per namespace."""

    namespaces: dict[str, str]


@dataclass(frozen=True, slots=True)
class Policies:
    """DNS policies as the index owner has them: client address -> the policies that apply to it."""

    clients: dict[str, Applied]


@dataclass(frozen=True, slots=True)
class FilterAaaa:
    """--filter-aaaa auto, as the index owner decided it."""

    active: bool
    reason: str


@dataclass(frozen=True, slots=True)
class Hosts:
    """--hosts: the table the supervisor built, in a memfd of its own (`size` bytes), its fd passed on the
    worker's table socket just before (SCM_RIGHTS, nodedns.serve.hostswatch.pass_table) for the worker to map
    read-only (`receive_table`): one table per node, no /proc access needed."""

    size: int
    reloads: int  # the supervisor's reading it comes from (a new one is a new table, even at the same fd)


@dataclass(frozen=True, slots=True)
class Retire:
    """Leave the addresses and exit: drain first, unless forced."""

    forced: bool


@dataclass(frozen=True, slots=True)
class Reload:
    """Re-read the upstream files (the supervisor's SIGHUP, passed on)."""


@dataclass(frozen=True, slots=True)
class Warm:
    """Forward caches and EDNS memory (nodedns.node.handover's parts): the running agent's, for a worker
    to load; or a worker's own, for an Export."""

    parts: list[bytes]


@dataclass(frozen=True, slots=True)
class Export:
    """A newer agent joined: send your forward cache (Warm)."""


# -- to the supervisor ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class State:
    """A worker's state, sent on every change."""

    bound: bool
    synced: bool
    live: bool
    heavy_imports: tuple[str, ...] = ()  # of the supervisor's libraries, those it loaded (none)


@dataclass(frozen=True, slots=True)
class Beat:
    """Its event loop runs (any message counts as much)."""


@dataclass(frozen=True, slots=True)
class Ask:
    """The cluster-zone and reverse misses of one event loop turn, as cache keys."""

    keys: list[bytes]


@dataclass(frozen=True, slots=True)
class Counters:
    """Its counters (published once a second, and a last time on exit)."""

    scrape: Scrape


@dataclass(frozen=True, slots=True)
class InsightRows:
    """Its answers by client since the last rows (tally.Row)."""

    rows: list[Row]


@dataclass(frozen=True, slots=True)
class Fatal:
    """The error a worker exits with (the supervisor prints the first one, once)."""

    code: int
    text: str


# what a worker's dispatch table takes (Start is read before it, by worker_main), what the supervisor's takes
ToWorker = (Answers | Names | Invalidate | Synced | Allow | Plans | Who | FilterAaaa | Retire | Reload | Warm | Export
            | Tenants | Hosts | Policies)
ToSupervisor = State | Beat | Ask | Counters | InsightRows | Warm | Fatal
Message = Start | ToWorker | ToSupervisor

# Each message's code on the channel (nodedns.workers.channel): its place here, from 1. A frame carries
# the code and the message's values, never its class's name.
CODED: tuple[type[Message], ...] = (Start, Answers, Names, Invalidate, Synced, Allow, Plans, Who, FilterAaaa, Retire,
                                    Reload, Warm, Export, State, Beat, Ask, Counters, InsightRows, Fatal, Tenants,
                                    Hosts, Policies)


# -- dispatch ------------------------------------------------------------------------------------

C = TypeVar("C")  # what a handler is called with besides the message (the agent, or the worker it came from)
M = TypeVar("M")


class Dispatch(Generic[C]):
    """One side's dispatch table: message type -> handler(context, message). `on` checks (mypy) that a
    handler takes the type it is registered for; a message is handed to the handler of its exact type."""

    def __init__(self) -> None:
        self.handlers: dict[type[object], Callable[[C, Any], None]] = {}

    def on(self, kind: type[M], handler: Callable[[C, M], None]) -> Dispatch[C]:
        self.handlers[kind] = cast("Callable[[C, Any], None]", handler)
        return self

    def __call__(self, context: C, message: object) -> bool:
        """Hand `message` to its handler; False (nothing done) for a type this side does not know."""
        handler = self.handlers.get(type(message))
        if handler is None:
            return False
        handler(context, message)
        return True
