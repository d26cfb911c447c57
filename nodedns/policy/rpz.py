"""An RPZ feed (a Response Policy Zone file, as unbound, Knot and BIND read it) read into compact tables (pure).

`parse(text)` reads an RFC 1035 master file whose SOA owner (else its first `$ORIGIN`) is the RPZ origin;
every record below the origin is a QNAME trigger relative to it, exact or wildcard (`*.name`):

    bad.example            CNAME .               NXDOMAIN
    nodata.example         CNAME *.              NODATA (NOERROR, no answer)
    ok.bad.example         CNAME rpz-passthru.   allow (also the older CNAME-to-itself form)
    sink.example           CNAME rpz-drop.       drop: no answer at all
    walled.example         A 192.0.2.1           local data: A, AAAA and TXT answered from the feed for
                                                 those types, NODATA for the others
    moved.example          CNAME www.example.net.  local data: a CNAME to that name, for every type

An exact trigger wins over a wildcard, a longer wildcard over a shorter. What the agent does not support is
counted by kind and left out, the rest of the feed applies; a feed with no origin applies nothing (said as
its problem). The `Feed` maps exact names and wildcard suffixes to a small action code, local data apart;
at most MAX_ENTRIES triggers are kept, the rest counted. The file format and what is not supported:
docs/policy.md "An RPZ feed".
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from nodedns.dns.wire import QT
from nodedns.names import name_problem

NXDOMAIN, NODATA, PASSTHRU, DROP, LOCAL = 1, 2, 3, 4, 5
ACTIONS = {NXDOMAIN: "NXDOMAIN", NODATA: "NODATA", PASSTHRU: "passthru", DROP: "drop", LOCAL: "local-data"}
UNSUPPORTED_TRIGGERS = ("rpz-ip", "rpz-nsdname", "rpz-nsip", "rpz-client-ip")
LOCAL_TYPES = {"A": QT.A, "AAAA": QT.AAAA, "TXT": QT.TXT}
MAX_ENTRIES = 200_000  # triggers kept at most (a 1 MiB ConfigMap holds fewer: its shortest line is 10 bytes)
MAX_EXAMPLES = 5  # lines quoted per kind of problem
DEFAULT_TTL = 300  # a local record's TTL when neither the record nor $TTL gives one
CLASSES = ("IN", "CH", "HS", "ANY")

LocalRecord = tuple[int, int, object]  # (type, ttl, data: address text, CNAME target, or a tuple of TXT strings)


@dataclass(frozen=True, slots=True, eq=False)
class Feed:
    """A parsed feed: its tables and what was left out (module docstring). Equal when the text was."""

    origin: str
    exact: dict[str, int]
    wild: dict[str, int]  # `*.x` as "x": names strictly below x ("" for `*.`: every name)
    local: dict[str, tuple[LocalRecord, ...]]  # "x" or "*.x" -> its records
    digest: str  # of the text it was read from
    entries: int = 0  # triggers applied
    left_out: dict[str, int] = field(default_factory=dict)  # why -> how many records
    examples: dict[str, tuple[str, ...]] = field(default_factory=dict)  # why -> a few of those lines
    problem: str = ""  # why nothing of it applies ("": it does)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Feed) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    @property
    def skipped(self) -> int:
        return sum(self.left_out.values())

    def match(self, qname: str, parents: Sequence[str]) -> tuple[int, str] | None:
        """(action code, trigger as written relative to the origin) for a name, None when no trigger matches.
        `parents`: the names above `qname`, nearest first, the root ("") last."""
        code = self.exact.get(qname)
        if code is not None:
            return code, qname
        wild = self.wild
        if wild:
            for p in parents:
                code = wild.get(p)
                if code is not None:
                    return code, f"*.{p}" if p else "*."
        return None

    def records(self, trigger: str) -> tuple[LocalRecord, ...]:
        """The local data of a trigger (as `match` names it)."""
        return self.local.get(trigger, ())

    def summary(self) -> str:
        """One line: what applies and what was left out."""
        if self.problem:
            return self.problem
        out = f"{self.entries} triggers applied"
        if self.left_out:
            out += "; left out: " + ", ".join(f"{n} {why}" for why, n in sorted(self.left_out.items()))
        return out


def local_answer(records: Sequence[LocalRecord], qtype: int) -> tuple[list[LocalRecord], str | None]:
    """The local records that answer `qtype` (a CNAME answers every type), and the CNAME's target (None:
    no CNAME). Nothing for the type: NODATA."""
    for r in records:
        if r[0] == QT.CNAME:
            return [r], str(r[2])
    if qtype == QT.ANY:
        return list(records), None
    return [r for r in records if r[0] == qtype], None


# ----------------------------------------------------------------------------------------------
# Reading the master file


def _records(text: str) -> Iterator[tuple[int, bool, list[str], str]]:
    """(line number, owner given, tokens, the line as written) per logical record: comments gone,
    parenthesized continuations joined, quoted strings kept as one token (quotes included)."""
    tokens: list[str] = []
    depth = 0
    start = 0
    owner_given = False
    shown = ""
    for number, line in enumerate(text.splitlines(), 1):
        if depth == 0:
            tokens, start, shown = [], number, line.strip()[:120]
            owner_given = bool(line) and not line[0].isspace()
        i, n = 0, len(line)
        while i < n:
            c = line[i]
            if c == ";":
                break
            if c.isspace():
                i += 1
                continue
            if c == "(":
                depth += 1
                i += 1
                continue
            if c == ")":
                depth = max(0, depth - 1)
                i += 1
                continue
            if c == '"':
                j = i + 1
                while j < n and line[j] != '"':
                    j += 2 if line[j] == "\\" else 1
                tokens.append(line[i:j + 1])
                i = j + 1
                continue
            j = i
            while j < n and not line[j].isspace() and line[j] not in ';()"':
                j += 1
            tokens.append(line[i:j])
            i = j
        if depth == 0 and tokens:
            yield start, owner_given, tokens, shown
    if depth and tokens:
        yield start, owner_given, tokens + [")"], shown  # an unclosed parenthesis: the record is read as is


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def _ttl(text: str) -> int | None:
    if text.isdigit():
        return int(text)
    total, num = 0, ""
    for c in text.lower():
        if c.isdigit():
            num += c
        elif c in _UNITS and num:
            total += int(num) * _UNITS[c]
            num = ""
        else:
            return None
    return None if num or not text else total


def _absolute(name: str, origin: str) -> str | None:
    """A master-file name made absolute (lowercase, no trailing dot), None when it is not a name."""
    if name == "@":
        return origin
    if "\\" in name:
        return None
    if name.endswith("."):
        return name[:-1].lower()
    name = name.lower()
    return f"{name}.{origin}" if origin else name


class _Reader:
    def __init__(self) -> None:
        self.exact: dict[str, int] = {}
        self.wild: dict[str, int] = {}
        self.local: dict[str, list[LocalRecord]] = {}
        self.left_out: dict[str, int] = {}
        self.examples: dict[str, list[str]] = {}
        self.entries = 0

    def leave_out(self, why: str, shown: str) -> None:
        self.left_out[why] = self.left_out.get(why, 0) + 1
        seen = self.examples.setdefault(why, [])
        if len(seen) < MAX_EXAMPLES:
            seen.append(shown)

    def trigger(self, key: str, wild: bool, code: int, shown: str) -> None:
        table = self.wild if wild else self.exact
        if key in table:
            if table[key] != code or code != LOCAL:
                self.leave_out("conflicting records for one trigger (the first kept)", shown)
            return
        if self.entries >= MAX_ENTRIES:
            self.leave_out(f"triggers past the bound of {MAX_ENTRIES}", shown)
            return
        table[key] = code
        self.entries += 1


def parse(text: str) -> Feed:
    """The feed a master file holds (module docstring); never raises."""
    digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()
    r = _Reader()
    origin: str | None = None  # $ORIGIN as it stands
    apex: str | None = None  # the RPZ origin: the SOA's owner (else the first $ORIGIN)
    default_ttl: int | None = None
    last_owner: str | None = None
    for _number, owner_given, tokens, shown in _records(text):
        head = tokens[0].upper()
        if head == "$ORIGIN":
            o = _absolute(tokens[1], "") if len(tokens) > 1 and tokens[1].endswith(".") else None
            if o is None:
                r.leave_out("unparseable records", shown)
                continue
            origin = o
            continue
        if head == "$TTL":
            t = _ttl(tokens[1]) if len(tokens) > 1 else None
            if t is None:
                r.leave_out("unparseable records", shown)
            else:
                default_ttl = t
            continue
        if head.startswith("$"):
            r.leave_out(f"{head} directives (not supported)", shown)
            continue
        rest = tokens
        if owner_given:
            owner = _absolute(tokens[0], origin or "")
            rest = tokens[1:]
        else:
            owner = last_owner
        ttl: int | None = None
        while rest and (rest[0].upper() in CLASSES or _ttl(rest[0]) is not None):
            if rest[0].upper() not in CLASSES:
                ttl = _ttl(rest[0])
            elif rest[0].upper() != "IN":
                owner = None  # another class: not ours
            rest = rest[1:]
        if owner is None or not rest:
            r.leave_out("unparseable records", shown)
            continue
        last_owner = owner
        rtype, rdata = rest[0].upper(), rest[1:]
        if rtype == "SOA":
            if apex is None:
                apex = owner
                if origin is None:
                    origin = owner  # no $ORIGIN: the names that follow are relative to the zone, as a server's are
            continue
        if apex is None:
            apex = origin
        if apex is None:
            return Feed("", {}, {}, {}, digest, problem="no SOA and no $ORIGIN: the RPZ origin is unknown, "
                        "nothing of the feed applies")
        if owner == apex:
            continue  # the origin's own NS and the like
        if not owner.endswith("." + apex) and apex:
            r.leave_out("records outside the RPZ origin", shown)
            continue
        rel = owner[: -(len(apex) + 1)] if apex else owner
        labels = rel.split(".")
        if labels[-1] in UNSUPPORTED_TRIGGERS:
            r.leave_out(f"{labels[-1]} triggers (not supported)", shown)
            continue
        wild = labels[0] == "*"
        key = ".".join(labels[1:]) if wild else rel
        if "*" in key or (key and name_problem(key) is not None):
            r.leave_out("unparseable records", shown)
            continue
        trigger = ("*." + key if key else "*.") if wild else key
        if rtype == "CNAME":
            if len(rdata) != 1:
                r.leave_out("unparseable records", shown)
                continue
            target = rdata[0].lower()
            code = {".": NXDOMAIN, "*.": NODATA, "rpz-passthru.": PASSTHRU, "rpz-drop.": DROP}.get(target)
            if target == "rpz-tcp-only.":
                r.leave_out("rpz-tcp-only actions (not supported)", shown)
                continue
            if code is None and _absolute(target, origin or "") == owner:
                code = PASSTHRU  # the older form of passthru: a CNAME to the name itself
            if code is None:
                if target.startswith("*."):
                    r.leave_out("wildcard CNAME targets (not supported)", shown)
                    continue
                absolute = _absolute(target, origin or "")
                if absolute is None or name_problem(absolute) is not None:
                    r.leave_out("unparseable records", shown)
                    continue
                if r.local.get(trigger):
                    r.leave_out("conflicting records for one trigger (the first kept)", shown)
                    continue
                r.trigger(key, wild, LOCAL, shown)
                if (r.wild if wild else r.exact).get(key) == LOCAL:
                    r.local[trigger] = [(QT.CNAME, ttl if ttl is not None else default_ttl or DEFAULT_TTL, absolute)]
                continue
            r.trigger(key, wild, code, shown)
            continue
        qtype = LOCAL_TYPES.get(rtype)
        if qtype is None:
            r.leave_out(f"local data of type {rtype} (not supported)", shown)
            continue
        value: object
        try:
            if qtype == QT.TXT:
                value = tuple(t[1:-1] if t.startswith('"') else t for t in rdata)
                if not rdata:
                    raise ValueError
            else:
                if len(rdata) != 1:
                    raise ValueError
                ip = ipaddress.ip_address(rdata[0])
                if (ip.version == 4) != (qtype == QT.A):
                    raise ValueError
                value = str(ip)
        except ValueError:
            r.leave_out("unparseable records", shown)
            continue
        have = r.local.get(trigger)
        if have is not None and have and have[0][0] == QT.CNAME:
            r.leave_out("conflicting records for one trigger (the first kept)", shown)
            continue
        if have is None:
            r.trigger(key, wild, LOCAL, shown)
            if (r.wild if wild else r.exact).get(key) != LOCAL:
                continue
            have = r.local[trigger] = []
        have.append((qtype, ttl if ttl is not None else default_ttl or DEFAULT_TTL, value))
    if apex is None:
        return Feed("", {}, {}, {}, digest, problem="no SOA and no $ORIGIN: the RPZ origin is unknown, "
                    "nothing of the feed applies")
    local = {k: tuple(v) for k, v in r.local.items()}
    return Feed(apex, r.exact, r.wild, local, digest, r.entries, r.left_out,
                {k: tuple(v) for k, v in r.examples.items()})
