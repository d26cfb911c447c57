"""Shadow judging: pairs each captured query with the current DNS's response and compares it with our own answer.

`Shadow.packet(data, now)` takes one captured IP packet (nodedns.shadow.sniff parses it): a query to the
watched port is remembered under (client address and port, server address and port, transport, ID,
question); the response coming back under the same key is paired with it and judged at once. A
query whose response does not come within `pair_timeout` is judged `unknown` ("no_response").

Our answer is the resolver's own (`Resolver.answer(query, wire, client=None)`, the path the
explainer asks; nothing here builds a record), for the query exactly as the Pod sent it (its ID,
EDNS payload size, flags):
- a name the index claims (the cluster zone, its reverse zones, the clusterset zone): the answer
  the agent would send now. Its rcode, TC bit and answer records are compared with the response
  seen; an ExternalName answer that needs an upstream for its target is compared on its CNAME
  records (they must be in the response seen) and the rcode.
- any other name: the response seen is the truth nodedns would have fetched from its upstreams,
  so records are not compared. What is checked is whether nodedns would ask at all and what shape
  the response has: a name nodedns answers itself (--hosts, --filter-aaaa, no route: REFUSED) is
  compared like a cluster name; one it would forward matches unless the response does not answer
  the question (question not echoed, QR unset: nodedns would refuse such an upstream response).

The comparison (`Answers`): rcode; TC; the answer section as a set of (owner, type, rdata), owner
and domain-name rdata lowercased (DNS names are case-insensitive; CoreDNS echoes the query's
spelling), TTLs ignored (every cache counts its own down), order ignored (round-robin), the OPT
record left out, the SRV weight left out (CoreDNS gives floor(100/n), kube-dns other figures).
The authority and additional sections are not compared (SOA serials are per server; additional
records are optional in the specification). Both TC: only the rcode is compared.

Results (`RESULTS`): `match`; `mismatch` (a reason of `MISMATCH_REASONS`, both answers kept);
`known`: a documented difference, not a fault of either side (`KNOWN_REASONS`: an object of the
name changed less than `propagation` seconds before the query, so one DNS has it and the other not
yet; an empty non-terminal or dns-version name answered NXDOMAIN by one side and NODATA by the
other: CoreDNS's own quirk); `unknown` (`UNKNOWN_REASONS`: no response seen, an index not synced
yet, the other DNS failing with SERVFAIL, a question we cannot ask the resolver). The last
`keep` mismatches and known differences are kept with the question, the client and its Pod (from
the index), both answers and the reason in words (`document()`, GET /debug/shadow).

Bounded: at most `max_rate` queries a second are judged (a token bucket; beyond it a query is
counted dropped, "rate", and its response ignored), at most `max_pending` queries and
`max_pending_bytes` of them wait for their response ("pending" beyond), a query over MAX_QUERY_BYTES
(a Pod's TCP query padded to 64 KB) is skipped and counted ("oversize": a real query is a few hundred
bytes), only responses of at most MAX_QUERY_BYTES are remembered parsed (`_memo`), the capture queue
and the kernel count their own drops (the agent adds them: "queue", "kernel"). A malformed packet or
message is skipped and counted ("malformed"), never raised.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nodedns.cluster.changes import Change
from nodedns.cluster.index import Index
from nodedns.dns.describe import describe
from nodedns.dns.message import parse_query
from nodedns.dns.wire import QT, RCODE, name_text, question_end, question_labels
from nodedns.errors import NodednsError
from nodedns.names import is_subdomain, relative_labels
from nodedns.serve.resolver import Resolver
from nodedns.shadow.sniff import dns_messages, parse_packet

log = logging.getLogger("nodedns.shadow")

RESULTS = ("match", "mismatch", "known", "unknown")
MISMATCH_REASONS = {
    "records": "the answer records differ",
    "rcode": "the rcode differs",
    "truncation": "one answer is truncated (TC) and the other not",
    "no_route": "nodedns has no upstream for this name: it would answer REFUSED",
    "local": "nodedns answers this name itself (--hosts, --filter-aaaa) and differently",
    "shape": "the response does not answer the question asked (nodedns would not accept it from an upstream)",
}
KNOWN_REASONS = {
    "propagation": "an object of this name changed less than a second before the query: one DNS has it, the "
                   "other not yet",
    "empty_non_terminal": "the other DNS answers NXDOMAIN for an empty non-terminal (or NODATA where nodedns, "
                          "as CoreDNS, answers NXDOMAIN)",
    "dns_version": "dns-version.<zone>: CoreDNS answers NXDOMAIN for other types than TXT, NODATA is "
                   "RFC-correct",
}
UNKNOWN_REASONS = {
    "no_response": "no response seen within the pairing timeout",
    "not_synced": "the index has not synced yet",
    "other_servfail": "the other DNS answered SERVFAIL",
    "unanswerable": "nodedns cannot judge this question (not a plain query, or an answer it could not compute)",
}
PAIR_TIMEOUT = 3.0
PROPAGATION = 1.0
KEEP = 50
MAX_PENDING = 20_000
MAX_PENDING_BYTES = 16 << 20  # the queries waiting for their response, in bytes
MAX_QUERY_BYTES = 4096  # a query longer than this is skipped (counted "oversize"); so is the memo of a response
MAX_RATE = 2_000.0
MEMO = 4096
_STRUCTURAL = (("svc",), ("pod",))


@dataclass(frozen=True, slots=True)
class Answers:
    """What is compared of a response: rcode, TC, and the answer records as a set."""

    rcode: int
    tc: bool
    records: frozenset[tuple[str, str, str]]
    qr: bool
    question: bytes


def _rdata(rtype: int, rdata: Any) -> str:
    if rtype == QT.SRV:
        return f"{rdata.priority} {rdata.port} {str(rdata.target).lower()}"  # the weight left out
    text = str(rdata)
    if rtype in (QT.CNAME, QT.PTR, QT.NS, QT.MX):
        return text.lower()
    return text


def read_answers(wire: bytes) -> Answers:
    """The comparable part of a response. NodednsError/ValueError-free: raises _Unreadable."""
    from nodedns.dns.wire import _dnslib

    try:
        record = _dnslib().DNSRecord.parse(wire)
        qend = question_end(wire)
    except Exception as exc:  # noqa: BLE001 - any byte string: dnslib raises many types
        raise _Unreadable(str(exc)) from None
    h = record.header
    rrs = frozenset((str(rr.rname).lower(), QT.name(rr.rtype), _rdata(rr.rtype, rr.rdata))
                    for rr in record.rr if rr.rtype != QT.OPT)
    return Answers(rcode=h.rcode, tc=bool(h.tc), records=rrs, qr=bool(h.qr), question=wire[12:qend].lower())


class _Unreadable(Exception):
    pass


@dataclass(slots=True)
class _Pending:
    at: float
    wall: float
    query: bytes
    transport: str


@dataclass(frozen=True, slots=True)
class Verdict:
    result: str
    reason: str = ""
    why: str = ""
    only_ours: tuple[str, ...] = ()
    only_theirs: tuple[str, ...] = ()


MATCH = Verdict("match")


class Shadow:
    """The pairing table, the judge and its counts (module docstring)."""

    def __init__(self, *, resolver: Resolver, index: Index, zone: str, port: int,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 pair_timeout: float = PAIR_TIMEOUT, propagation: float = PROPAGATION, keep: int = KEEP,
                 max_pending: int = MAX_PENDING, max_rate: float = MAX_RATE,
                 max_pending_bytes: int = MAX_PENDING_BYTES) -> None:
        self.resolver = resolver
        self.index = index
        self.zone = zone
        self.port = port
        self.clock = clock
        self.wall = wall
        self.pair_timeout = pair_timeout
        self.propagation = propagation
        self.max_pending = max_pending
        self.max_pending_bytes = max_pending_bytes
        self.pending_bytes = 0  # of the queries in `pending`
        self.max_rate = max_rate
        self.pending: dict[tuple[Any, ...], _Pending] = {}
        self.answers: collections.Counter[str] = collections.Counter({r: 0 for r in RESULTS})
        self.mismatches: collections.Counter[str] = collections.Counter()
        self.known: collections.Counter[str] = collections.Counter()
        self.unknown: collections.Counter[str] = collections.Counter()
        self.dropped: collections.Counter[str] = collections.Counter()
        self.packets = 0
        self.skipped: collections.Counter[str] = collections.Counter()  # not judged, not dropped
        self.recent: collections.deque[dict[str, Any]] = collections.deque(maxlen=keep)
        self.recent_known: collections.deque[dict[str, Any]] = collections.deque(maxlen=keep)
        self._tokens = max_rate
        self._filled = clock()
        self._memo: dict[bytes, Answers] = {}
        self._changed: dict[tuple[str, str], tuple[float, str]] = {}  # (namespace, name) -> (when, what)
        self._any_change = -1e18

    # -- index changes (for the propagation race) -------------------------------------------

    def record_changed(self, change: Change) -> None:
        """A change listener (the shadow agent adds it): when and what changed, for the propagation race."""
        kind, old, new = change.kind, change.old, change.new
        if not self.index.synced or not kind:  # the first load or list is no change the other DNS could lag on
            return
        now = self.clock()
        self._any_change = now
        obj = new if new is not None else old
        namespace = getattr(obj, "namespace", None)
        name = getattr(obj, "service", None) or getattr(obj, "name", None)
        if isinstance(namespace, str) and isinstance(name, str):
            what = f"{kind or 'object'} {namespace}/{name} {'deleted' if new is None else 'changed'}"
            if old is None:
                what = f"{kind or 'object'} {namespace}/{name} created"
            self._changed[(namespace, name)] = (now, what)
            if len(self._changed) > 4 * MEMO:  # keep only the recent ones
                cut = now - 10 * self.propagation
                self._changed = {k: v for k, v in self._changed.items() if v[0] >= cut}

    def _recent_change(self, qname: str, asked_at: float) -> str | None:
        """What changed about this name within `propagation` seconds of the query, in words; None: nothing."""
        labels = _labels(qname, self.zone)
        if labels is None:  # a reverse or clusterset name: any change of the index may be the one
            age = asked_at - self._any_change
            return f"the index changed {max(age, 0):.1f} s before the query" if age < self.propagation else None
        for name, namespace in zip(labels, labels[1:], strict=False):  # <name>.<namespace>.svc|pod
            hit = self._changed.get((namespace, name))
            if hit is not None and asked_at - hit[0] < self.propagation:
                age = asked_at - hit[0]
                when = f"{age:.1f} s before the query" if age >= 0 else f"{-age:.1f} s after the query"
                return f"{hit[1]} {when}, not yet in both DNS"
        return None

    # -- packets ------------------------------------------------------------------------------

    def packet(self, data: bytes, now: float | None = None) -> None:
        """One captured IP packet (from its IP header). Never raises on what the packet holds."""
        self.packets += 1
        seg = parse_packet(data)
        if seg is None:
            self.skipped["not_dns"] += 1
            return
        now = self.clock() if now is None else now
        messages, partial = dns_messages(seg)
        if partial:
            self.skipped["tcp_partial"] += 1
        transport = "tcp" if seg.tcp else "udp"
        for msg in messages:
            if seg.dport == self.port:
                self._query(msg, (seg.src, seg.sport, seg.dst, seg.dport, transport), now)
            elif seg.sport == self.port:
                self._response(msg, (seg.dst, seg.dport, seg.src, seg.sport, transport), now)
            else:
                self.skipped["other_port"] += 1

    @staticmethod
    def _key(msg: bytes, flow: tuple[Any, ...]) -> tuple[Any, ...] | None:
        if len(msg) < 17 or msg[4:6] != b"\x00\x01":
            return None
        try:
            qend = question_end(msg)
        except NodednsError:
            return None
        return (*flow, msg[0:2], msg[12:qend].lower())

    def _query(self, msg: bytes, flow: tuple[Any, ...], now: float) -> None:
        if msg[2] & 0x80 if len(msg) > 2 else True:
            self.skipped["malformed"] += 1  # a response to our port, or no header
            return
        if len(msg) > MAX_QUERY_BYTES:
            self.skipped["oversize"] += 1  # padded far past any question: not held, not judged
            return
        key = self._key(msg, flow)
        if key is None:
            self.skipped["malformed"] += 1
            return
        if key in self.pending:
            self.skipped["retransmit"] += 1  # the first copy is judged
            return
        self._tokens = min(self.max_rate, self._tokens + (now - self._filled) * self.max_rate)
        self._filled = now
        if self._tokens < 1:
            self.dropped["rate"] += 1
            return
        if len(self.pending) >= self.max_pending or self.pending_bytes + len(msg) > self.max_pending_bytes:
            self.dropped["pending"] += 1
            return
        self._tokens -= 1
        self.pending[key] = _Pending(now, self.wall(), msg, flow[4])
        self.pending_bytes += len(msg)

    def _response(self, msg: bytes, flow: tuple[Any, ...], now: float) -> None:
        if len(msg) < 12 or not msg[2] & 0x80:
            self.skipped["malformed"] += 1
            return
        key = self._key(msg, flow)
        pend = self.pending.pop(key, None) if key is not None else None
        if pend is not None:
            self.pending_bytes -= len(pend.query)
        if pend is None:
            self.skipped["unpaired_response"] += 1  # its query was dropped, sent before we started, or not ours
            return
        try:
            verdict = self.judge(pend.query, msg, pend.at)
        except Exception as exc:  # noqa: BLE001 - a judge's error costs this pair, never the capture
            log.debug("shadow: cannot judge a pair: %r", exc)
            verdict = Verdict("unknown", "unanswerable", UNKNOWN_REASONS["unanswerable"])
        self._count(verdict, pend, flow, msg)

    def expire(self, now: float | None = None) -> int:
        """Queries older than the pairing timeout, judged unknown; how many."""
        now = self.clock() if now is None else now
        cut = now - self.pair_timeout
        old = [k for k, p in self.pending.items() if p.at < cut]
        for k in old:
            pend = self.pending.pop(k)
            self.pending_bytes -= len(pend.query)
            self._count(Verdict("unknown", "no_response", UNKNOWN_REASONS["no_response"]), pend, k[:5], None)
        return len(old)

    # -- judging ------------------------------------------------------------------------------

    def _answers(self, wire: bytes) -> Answers:
        key = wire[2:]
        got = self._memo.get(key)
        if got is None:
            got = read_answers(wire)
            if len(wire) <= MAX_QUERY_BYTES:  # a large one is parsed each time, never held
                if len(self._memo) >= MEMO:
                    self._memo.clear()
                self._memo[key] = got
        return got

    def judge(self, query: bytes, response: bytes, asked_at: float) -> Verdict:
        """The verdict on one pair (the query as the client sent it, the response the other DNS sent)."""
        try:
            q = parse_query(query)
            theirs = self._answers(response)
        except (NodednsError, _Unreadable):
            return Verdict("unknown", "unanswerable", UNKNOWN_REASONS["unanswerable"])
        if q.opcode != 0:
            return Verdict("unknown", "unanswerable", UNKNOWN_REASONS["unanswerable"])
        claimed = self.resolver.records.claims(q.qname)
        if claimed and not self.index.synced:
            return Verdict("unknown", "not_synced", UNKNOWN_REASONS["not_synced"])
        outcome: Any = self.resolver.answer(q, query, None)
        if not isinstance(outcome, bytes):
            if hasattr(outcome, "close"):
                outcome.close()  # a coroutine: it would ask an upstream; nothing ran
            if not claimed:
                return self._shape(q.question.lower(), theirs)
            return self._chased(q.qname, q.qtype, theirs, asked_at)
        ours = self._answers(outcome)
        verdict = self._compare(q.qname, q.qtype, ours, theirs)
        if verdict.reason == "records" and claimed and not verdict.only_ours and all(
                not self.resolver.records.claims(text.split(" ", 1)[0].rstrip(".")) for text in verdict.only_theirs):
            return MATCH  # an ExternalName's target outside our zones (no upstream here): fetched, the truth
        if verdict.result == "mismatch" and not claimed:
            reason = "no_route" if ours.rcode == RCODE.REFUSED else "local"
            verdict = Verdict("mismatch", reason, MISMATCH_REASONS[reason], verdict.only_ours, verdict.only_theirs)
        if verdict.result == "mismatch" and claimed:
            change = self._recent_change(q.qname, asked_at)
            if change is not None:
                return Verdict("known", "propagation", change, verdict.only_ours, verdict.only_theirs)
        return verdict

    def _shape(self, question: bytes, theirs: Answers) -> Verdict:
        if not theirs.qr or theirs.question != question:
            return Verdict("mismatch", "shape", MISMATCH_REASONS["shape"])
        return MATCH

    def _chased(self, qname: str, qtype: int, theirs: Answers, asked_at: float) -> Verdict:
        """An answer that needs an upstream (an ExternalName's outside target): our CNAME records must be there."""
        found = self.resolver.records.lookup(qname, qtype)
        if found is None:
            return Verdict("unknown", "unanswerable", UNKNOWN_REASONS["unanswerable"])
        ours = frozenset((rr.name + ".", QT.name(rr.rtype), rr.data.lower() + ".")
                         for rr in found.answer if rr.rtype == QT.CNAME and isinstance(rr.data, str))
        missing = ours - theirs.records
        if theirs.rcode == RCODE.SERVFAIL:
            return Verdict("unknown", "other_servfail", UNKNOWN_REASONS["other_servfail"])
        if missing:
            change = self._recent_change(qname, asked_at)
            if change is not None:
                return Verdict("known", "propagation", change, _texts(missing), ())
            return Verdict("mismatch", "records", MISMATCH_REASONS["records"], _texts(missing), ())
        return MATCH

    def _compare(self, qname: str, qtype: int, ours: Answers, theirs: Answers) -> Verdict:
        if ours.tc or theirs.tc:
            if ours.tc != theirs.tc:
                return Verdict("mismatch", "truncation", MISMATCH_REASONS["truncation"])
            return MATCH if ours.rcode == theirs.rcode else Verdict("mismatch", "rcode", MISMATCH_REASONS["rcode"])
        if ours.rcode != theirs.rcode:
            if theirs.rcode == RCODE.SERVFAIL:
                return Verdict("unknown", "other_servfail", UNKNOWN_REASONS["other_servfail"])
            pair = {ours.rcode, theirs.rcode}
            nodata = (ours if ours.rcode == RCODE.NOERROR else theirs).records == frozenset()
            if pair == {RCODE.NOERROR, RCODE.NXDOMAIN} and nodata:
                known = self._quirk(qname)
                if known is not None:
                    return Verdict("known", known, KNOWN_REASONS[known])
            why = f"nodedns answers {RCODE.name(ours.rcode)}, the other DNS {RCODE.name(theirs.rcode)}"
            return Verdict("mismatch", "rcode", why, _texts(ours.records), _texts(theirs.records))
        if ours.records != theirs.records:
            return Verdict("mismatch", "records", MISMATCH_REASONS["records"],
                           _texts(ours.records - theirs.records), _texts(theirs.records - ours.records))
        return MATCH

    def _quirk(self, qname: str) -> str | None:
        """The known difference an NXDOMAIN-against-NODATA on this name is, or None."""
        labels = _labels(qname, self.zone)
        if labels is None:
            return None
        if labels == ("dns-version",):
            return "dns_version"
        if labels in _STRUCTURAL or (len(labels) == 2 and labels[1] == "svc" and self.index.has_namespace(labels[0])):
            return "empty_non_terminal"
        return None

    # -- counts and the document ---------------------------------------------------------------

    def _count(self, verdict: Verdict, pend: _Pending, flow: tuple[Any, ...], response: bytes | None) -> None:
        self.answers[verdict.result] += 1
        if verdict.result == "mismatch":
            self.mismatches[verdict.reason] += 1
        elif verdict.result == "known":
            self.known[verdict.reason] += 1
        elif verdict.result == "unknown":
            self.unknown[verdict.reason] += 1
        if verdict.result not in ("mismatch", "known"):
            return
        entry = self._entry(verdict, pend, flow, response)
        (self.recent if verdict.result == "mismatch" else self.recent_known).appendleft(entry)

    def _entry(self, verdict: Verdict, pend: _Pending, flow: tuple[Any, ...], response: bytes | None) -> dict[str, Any]:
        query = pend.query
        try:
            qend = question_end(query)
            name = name_text(question_labels(query[12:qend])) + "."
            qtype = QT.name((query[qend - 4] << 8) | query[qend - 3])
        except (NodednsError, IndexError):
            name, qtype = "?", "?"
        ours: Any = None
        try:
            q = parse_query(query)
            out: Any = self.resolver.answer(q, query, None)
            if isinstance(out, bytes):
                ours = describe(out)
            elif hasattr(out, "close"):
                out.close()
                ours = {"forwarded": "nodedns would ask its upstreams"}
        except NodednsError:
            ours = None
        client = flow[0]
        pods = [p for p in self.index.pods_with_ip(client) if not p.terminating]
        pods.sort(key=lambda p: (p.host_network, p.namespace, p.name))
        return {
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(pend.wall)),
            "question": {"name": name, "type": qtype},
            "client": _hostport(flow[0], flow[1]),
            "pod": f"{pods[0].namespace}/{pods[0].name}" if pods else None,
            "server": _hostport(flow[2], flow[3]),
            "transport": pend.transport,
            "result": verdict.result,
            "reason": verdict.reason,
            "why": verdict.why,
            "only_ours": list(verdict.only_ours),
            "only_theirs": list(verdict.only_theirs),
            "ours": ours,
            "theirs": describe(response) if response is not None else None,
        }

    def status(self) -> dict[str, Any]:
        """The "shadow" section of /status and /metrics."""
        return {"answers": dict(self.answers), "mismatches": dict(self.mismatches), "known": dict(self.known),
                "unknown": dict(self.unknown), "dropped": dict(self.dropped), "pending": len(self.pending),
                "pending_bytes": self.pending_bytes,
                "packets": self.packets, "skipped": dict(self.skipped)}

    def document(self, limit: int = KEEP) -> dict[str, Any]:
        """GET /debug/shadow: the counts, the last `limit` mismatches and known differences, the reasons."""
        doc = self.status()
        doc.update(
            port=self.port,
            mismatch_list=list(self.recent)[:limit],
            known_list=list(self.recent_known)[:limit],
            reasons={"mismatch": MISMATCH_REASONS, "known": KNOWN_REASONS, "unknown": UNKNOWN_REASONS},
        )
        return doc


def _labels(qname: str, zone: str) -> tuple[str, ...] | None:
    """The labels of a cluster-zone name left of the zone; None for a name outside it."""
    return tuple(relative_labels(qname, zone)) if is_subdomain(qname, zone) else None


def _texts(records: Iterable[tuple[str, str, str]]) -> tuple[str, ...]:
    return tuple(sorted(f"{n} {t} {d}" for n, t, d in records))


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def summary(doc: Mapping[str, Any]) -> str:
    """One line of counts (logs, the report's head)."""
    a = doc.get("answers") or {}
    return ", ".join(f"{a.get(r, 0):,} {r}" for r in RESULTS)
