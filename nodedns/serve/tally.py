"""Who asked what, per client address, in one answering process over one interval (pure): the rows insight is made of.

Each process that answers DNS (the one agent, or each `--workers` worker) counts every answer it
sends by client address:

    the UDP hit path     `hits[address][stored answer] += 1`: in C (nodedns/serve/_hitpath.c) or in Python
                         (`count_hit`, from nodedns.serve.hitpath); the stored answer is the hot dict's own bytes
                         object, so counting a hit is one dict lookup and one increment
    the slow path        `answered(...)`: `slow[address][(name, type, slot)]`, with the time an
                         upstream took for a forwarded answer (UDP and TCP alike); loop probes
                         (HINFO `<digits>.<digits>.<zone>`, the agent's own) are no client's and
                         are left out

Once a second, and at once before the address -> Pod map changes, `flush` turns what was counted
into `Row`s keyed by Pod generation and starts again. The map (`gens`: address -> generation) comes
from the owner of the index (`insight.Insight.gens`, pushed to the --workers workers as the allow
list's inputs are): a generation names one Pod for as long as it lives, so rows counted before a
new Pod took over an address stay with the old one. Addresses not in the map are `UNKNOWN`, the
node's own and host-network Pods' are `HOST`; rows of those two groups keep the client address.
The rows go to `insight.Insight.take` (in this process, or over the channel to the supervisor).

Bounded, whatever the clients send: at most MAX_CLIENTS addresses per interval (further ones share
the OVERFLOW entry, counted as UNKNOWN), MAX_ANSWERS distinct answers per address in one piece of
counts. A client whose piece is full and who is sent a new answer gets a fresh piece: the full one is
set aside whole (`sealed` for hits, `sealed_slow` for the slow path; at most MAX_SEALED of each per
interval, shared by the clients) and flushed with the rest. So a Pod walking its search list fast
(an ndots:5 walk is four names) is counted name by name, up to (MAX_SEALED + 1) x MAX_ANSWERS names
an interval when it is the only busy client; only past that, further new answers of a full piece
are counted by their label slot, without a name: `Tally.hit` marks the piece (the BY_SLOT key) and
from then on the hit paths count those by slot themselves, so a client asking a thousand names over
and over costs per hit what one asking few does (it was a call into `Tally.hit` for most of its hits).
A client spraying random names costs a fixed amount here. Names live here for one interval at most;
nothing is logged. nodedns/serve/_hitpath.c keeps the same two bounds (`TALLY_CLIENTS`,
`TALLY_ANSWERS`: tests/unit/observe/test_insight_hitpath.py checks they agree) and the mark, and calls
`Tally.hit` for a hit that does not fit its client's unmarked piece (it sets the piece aside, or
marks it), as the Python one (nodedns.serve.hitpath) does.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import NamedTuple

from nodedns.dns.wire import QT, question_of
from nodedns.metrics.slots import DROPPED_ZONE, PLUGIN_CACHE, PLUGIN_CLUSTER, PLUGIN_FORWARD, SlotLabels

MAX_CLIENTS = 512  # client addresses counted one by one per interval (TALLY_CLIENTS in _hitpath.c)
MAX_ANSWERS = 64  # distinct answers (names) per address per interval (TALLY_ANSWERS in _hitpath.c)
NAMES_KEPT = 2048  # stored answers whose question is remembered from one interval to the next
KEPT_ANSWER_BYTES = 512  # of those, only answers this small: what is kept holds at most ~1 MB of answers
MAX_SEALED = 64  # full pieces of a client's counts set aside per interval (hits, slow answers: each)
OVERFLOW = ""  # the entry the addresses beyond MAX_CLIENTS share
BY_SLOT = None  # marks a full piece whose new answers are counted by label slot (no piece left to set aside)

UNKNOWN = 0  # a client address that is no Pod of this node
HOST = -1  # the node itself: loopback, its own and its Node's addresses, host-network Pods

# Where an answer came from (`Row.source`)
CLUSTER = "cluster"  # the index (cluster, clusterset and reverse zones)
FORWARDED = "forwarded"  # an upstream or a stub domain, now or earlier (from the cache)
SERVER = "server"  # the agent itself: REFUSED, FORMERR, NOTIMP, ...

Answers = dict[bytes | int | None, int]  # stored answer (or label slot, or the BY_SLOT mark) -> count
SlowKey = tuple[str, int, int]  # (name, type, label slot)


class Row(NamedTuple):
    """What one client (a Pod generation, or an address of the host or unknown group) got for one
    name and type with one rcode in one interval."""

    gen: int  # a Pod generation (>= 1), HOST or UNKNOWN
    client: str  # the address, for HOST and UNKNOWN rows; "" for a Pod's
    name: str  # lowercase, no trailing dot ("." for the root); "" when not kept (over MAX_ANSWERS)
    qtype: int
    rcode: str  # "NOERROR", "NXDOMAIN", ...
    source: str  # CLUSTER, FORWARDED or SERVER
    answers: int
    cached: int  # of them, answered from stored answers (the hit path, the forward cache)
    upstream: int  # of them, waited for an upstream
    upstream_seconds: float  # the time those waited


def count_hit(hits: dict[str, Answers], host: str, w: bytes) -> bool:
    """One more answer sent from the stored bytes `w` to `host` in `hits` (`Tally.hits`): False, and not
    counted, when the client's piece is full and `w` new to it (`Tally.hit` sets the piece aside).

    What both hit paths count per hit: the Python one (nodedns.serve.hitpath.serve) calls this, the C
    one (nodedns/serve/_hitpath.c: tally_client, tally_hit) does the same steps; on a False both call
    `Tally.hit` (given as `on_full`), which starts a fresh piece."""
    cd = hits.get(host)
    if cd is None:
        if len(hits) >= MAX_CLIENTS:
            host = OVERFLOW
            cd = hits.get(host)
        if cd is None:
            cd = hits[host] = {}
    n = cd.get(w)
    if n is not None:
        cd[w] = n + 1
        return True
    if len(cd) < MAX_ANSWERS:
        cd[w] = 1
        return True
    if BY_SLOT in cd:  # no piece left to set aside this interval: counted by its label slot
        cd[w[0]] = cd.get(w[0], 0) + 1
        return True
    return False


class Tally:
    """The counts of one answering process for the current interval (module docstring)."""

    __slots__ = ("hits", "slow", "gens", "sealed", "sealed_slow", "names")

    def __init__(self) -> None:
        self.hits: dict[str, Answers] = {}
        self.slow: dict[str, dict[SlowKey | int, list[float]]] = {}
        self.gens: Mapping[str, int] = {}
        self.sealed: list[tuple[str, Answers]] = []  # full pieces of hits, set aside whole (module docstring)
        self.sealed_slow: list[tuple[str, dict[SlowKey | int, list[float]]]] = []
        # stored answer -> (name, type), kept from one interval to the next (the same hot answers come
        # every second; a refresh stores new ones): at most NAMES_KEPT answers of at most
        # KEPT_ANSWER_BYTES (the keys hold the answers: a tenant's large ones are not kept alive here
        # after the cache let them go), started again when full
        self.names: dict[bytes, tuple[str, int]] = {}

    # -- counting ------------------------------------------------------------------------------

    def client(self, host: str) -> Answers:
        """The hit counts of `host` in this interval (created; the OVERFLOW entry beyond MAX_CLIENTS)."""
        hits = self.hits
        if len(hits) >= MAX_CLIENTS and host not in hits:
            host = OVERFLOW
        cd = hits.get(host)
        if cd is None:
            cd = hits[host] = {}
        return cd

    def hit(self, host: str, w: bytes) -> None:
        """One answer sent from the stored bytes `w` (byte 0: its label slot): `count_hit`, and when the
        client's piece is full, the piece set aside whole and a fresh one started (module docstring)."""
        if count_hit(self.hits, host, w):
            return
        hits = self.hits
        cd = self.client(host)
        if len(self.sealed) < MAX_SEALED:
            key = host if hits.get(host) is cd else OVERFLOW
            self.sealed.append((key, cd))  # the full piece, whole; a fresh one from this answer on
            hits[key] = {w: 1}
        else:  # marked: the piece's further new answers are counted by slot where they are counted
            cd[BY_SLOT] = 0
            cd[w[0]] = cd.get(w[0], 0) + 1

    def answered(self, host: str, query: bytes, slot: int, upstream_seconds: float | None) -> None:
        """One answer made on the slow path (`slot`: its labels), after `upstream_seconds` waiting for
        an upstream (None: it did not)."""
        slow = self.slow
        cd = slow.get(host)
        if cd is None:
            if len(slow) >= MAX_CLIENTS:
                host = OVERFLOW
            cd = slow.get(host)
            if cd is None:
                cd = slow[host] = {}
        q = question_of(query)
        if q is not None and q[1] == QT.HINFO and _probe_shaped(q[0]):
            return  # a loop probe (the agent's own, or a peer's): no client's question
        key: SlowKey | int = (q[0], q[1], slot) if q is not None else slot
        entry = cd.get(key)
        if entry is None:
            if len(cd) >= MAX_ANSWERS:
                if len(self.sealed_slow) < MAX_SEALED:
                    self.sealed_slow.append((host, cd))  # the full piece, whole; a fresh one from here on
                    cd = slow[host] = {}
                else:
                    key = slot
                    entry = cd.get(key)
            if entry is None:
                entry = cd[key] = [0, 0, 0.0]
        entry[0] += 1
        if upstream_seconds is not None:
            entry[1] += 1
            entry[2] += upstream_seconds

    # -- handing on ------------------------------------------------------------------------------

    def empty(self) -> bool:
        return not self.hits and not self.slow and not self.sealed and not self.sealed_slow

    def flush(self, labels: Sequence[SlotLabels]) -> list[Row]:
        """The rows of the interval that ends now (under the current `gens`); counting starts again."""
        steps = self.flusher(labels)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                return list(done.value)

    def flusher(self, labels: Sequence[SlotLabels], step: int = 0) -> Generator[None, None, list[Row]]:
        """`flush` in slices: the interval ends (counting starts again) at the first `next()`; after
        every `step` counted entries (0: none) it yields, so the caller can let the event loop run; the
        rows are the generator's return value. Rows are formed under the `gens` of the interval's end."""
        hits, slow = [*self.sealed, *self.hits.items()], [*self.sealed_slow, *self.slow.items()]
        self.hits, self.slow, self.sealed, self.sealed_slow = {}, {}, [], []
        if not hits and not slow:
            return []
        done = 0
        gens = self.gens
        merged: dict[tuple[int, str, str, int, str, str], list[float]] = {}
        names = self.names  # stored answer -> (name, type): shared by every client

        def add(host: str, name: str, qtype: int, slot: int, n: int, cached: int, up: int, up_s: float) -> None:
            lab = labels[slot] if slot < len(labels) else None
            if lab is None or lab.zone == DROPPED_ZONE or not lab.rcode:
                return
            gen = gens.get(host, UNKNOWN) if host != OVERFLOW else UNKNOWN
            key = (gen, host if gen <= 0 else "", name, qtype, lab.rcode, source_of(lab))
            acc = merged.get(key)
            if acc is None:
                merged[key] = [n, cached, up, up_s]
            else:
                acc[0] += n
                acc[1] += cached
                acc[2] += up
                acc[3] += up_s

        for host, answers in hits:
            done += len(answers)
            if step and done >= step:
                done = 0
                yield
            for w, n in answers.items():
                if w is BY_SLOT:
                    continue
                if isinstance(w, int):
                    add(host, "", 0, w, n, n, 0, 0.0)
                    continue
                nt = names.get(w)
                if nt is None:
                    q = question_of(w)
                    nt = (_name(q[0]), q[1]) if q is not None else ("", 0)
                    if len(w) <= KEPT_ANSWER_BYTES:  # a large answer is not held past its life in the cache
                        names[w] = nt
                add(host, nt[0], nt[1], w[0], n, n, 0, 0.0)
        for host, entries in slow:
            done += len(entries)
            if step and done >= step:
                done = 0
                yield
            for key, (answered, up, up_s) in entries.items():
                if isinstance(key, int):
                    add(host, "", 0, key, int(answered), 0, int(up), up_s)
                    continue
                name, qtype, slot = key
                lab = labels[slot] if slot < len(labels) else None
                cached = int(answered) if lab is not None and lab.plugin == PLUGIN_CACHE else 0
                add(host, _name(name), qtype, slot, int(answered), cached, int(up), up_s)
        if len(names) > NAMES_KEPT:  # not kept past the bound: the next interval starts from none
            self.names = {}
        return [Row(gen, client, name, qtype, rcode, source, int(acc[0]), int(acc[1]), int(acc[2]), acc[3])
                for (gen, client, name, qtype, rcode, source), acc in merged.items()]

    def retag(self, gens: Mapping[str, int], labels: Sequence[SlotLabels]) -> list[Row]:
        """Install a new address -> Pod generation map; the rows counted under the old one first."""
        rows = self.flush(labels)
        self.gens = gens
        return rows


def source_of(labels: SlotLabels) -> str:
    """CLUSTER, FORWARDED or SERVER: who made an answer with these labels."""
    if labels.plugin == PLUGIN_CLUSTER:
        return CLUSTER
    if labels.plugin in (PLUGIN_CACHE, PLUGIN_FORWARD):
        return FORWARDED
    return SERVER


def went_upstream(labels: SlotLabels) -> bool:
    """The answer was made by an upstream (or a stub domain's server) just now: its wait counts."""
    return labels.plugin == PLUGIN_FORWARD


def _probe_shaped(name: str) -> bool:
    """`<digits>.<digits>.<zone>`: a loop probe's name (forwarding.is_probe_name, with HINFO)."""
    first, _, rest = name.partition(".")
    return first.isdigit() and rest.partition(".")[0].isdigit()


def _name(text: str) -> str:
    """A question's name as insight keeps it: lowercase, no trailing dot ("." for the root)."""
    return text[:-1] if len(text) > 1 and text.endswith(".") else text
