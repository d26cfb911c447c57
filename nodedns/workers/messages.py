"""The worker protocol: every message between the supervisor and a worker, typed, and each side's dispatch table.

A worker's socketpair to the supervisor (nodedns.workers.channel) carries these messages, each as its code
(`CODED`) and its values. A worker reads `Start` first, blocking (worker_main); then each side hands what it
reads to its one `Dispatch` table. `ToWorker` and `ToSupervisor` list what each side takes; each class says
what it carries. A message of a type the receiving side has no handler for is logged and ignored; bytes that do
not decode close the channel.

Order on the stream is the contract: the supervisor writes a reply before any `Invalidate` of a later change and
a worker keeps a reply before it reads on, so no worker keeps an answer past a change of what it was built from.
Messages are frozen and compare by value (derived data is sent only when it differs). Why derived data is pushed
and cluster answers asked: docs/restarts.md "Workers: all cores"; insight's split: docs/insight.md.
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
    """The owner's replies to one Ask, in its order (a key it could not read is left out). `keep` is false before
    the first sync: no tags are sent for the changes of the first list, so such a reply is used, not kept."""

    answers: list[Answer]


@dataclass(frozen=True, slots=True)
class Names:
    """What exists (an update, or the whole of it for a new worker), sent before the invalidations of its flush."""

    state: NamesState


@dataclass(frozen=True, slots=True)
class Invalidate:
    """The tags the index changes of one event loop turn touched, as one message written before any reply
    computed after them; None: everything."""

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
    to load (before Synced); or a worker's own, for an Export."""

    parts: list[bytes]


@dataclass(frozen=True, slots=True)
class Export:
    """A newer agent joined: send your forward cache (Warm)."""


# -- to the supervisor ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class State:
    """A worker's state, sent on every change: bound, synced, live, the heavy libraries it loaded."""

    bound: bool
    synced: bool
    live: bool
    heavy_imports: tuple[str, ...] = ()  # of the supervisor's libraries, those it loaded (none)


@dataclass(frozen=True, slots=True)
class Beat:
    """Its event loop runs: every HEARTBEAT_PERIOD (any message counts as much)."""


@dataclass(frozen=True, slots=True)
class Ask:
    """The cluster-zone and reverse misses of one event loop turn, as cache keys (one in flight per key; the
    owner reads a key with keys.key_query)."""

    keys: list[bytes]


@dataclass(frozen=True, slots=True)
class Counters:
    """Its counters (published once a second, and a last time on exit)."""

    scrape: Scrape


@dataclass(frozen=True, slots=True)
class InsightRows:
    """Its answers by client since the last rows (tally.Row): once a second and before it takes a new Who."""

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
