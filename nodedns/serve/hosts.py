"""Local records from hosts(5) files (--hosts): the text parsed into a table of names and addresses.

A line is `IP CANONICAL [ALIAS...]`, fields split by blanks, `#` to the end of the line a comment
(hosts(5)); IPv4 and IPv6 addresses. Names are matched without regard to case (stored lowercase, no
trailing dot). The table answers as CoreDNS's `hosts` plugin does with `fallthrough`:

    A / AAAA for a hosts name        its addresses of that family in file order (AA); none of
                                     that family: NODATA (NOERROR, AA, no records, no SOA)
    any other type for a hosts name  NODATA (as CoreDNS: the name exists, the type does not)
    PTR for a hosts address          every name given to it (canonical and aliases), in file order
    anything else                    not ours (None): the query goes on (forwarded)

Nothing here reads a file (nodedns.serve.hostswatch does). A malformed line (an IP `canonical_ip` refuses,
a name `names.name_problem` refuses, an IP with no name) is reported with its file and line and
skipped; so is a name inside a zone the agent serves (`excluded`: the cluster zone wins), whose
line is reported once per reading. The TTL of every record is the caller's (the agent uses --ttl).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from nodedns.dns.pack import RR
from nodedns.dns.wire import QT
from nodedns.names import canonical_ip, is_ipv6, name_problem, normalize_name, reverse_name


@dataclass(frozen=True, slots=True)
class Source:
    """Where a record came from: the file and the line number (from 1)."""

    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True, slots=True)
class Problem:
    """A line skipped (malformed) or ignored (a name in the cluster zone): where, and why."""

    source: Source
    reason: str
    ignored: bool = False  # well-formed, but a name of a zone the agent serves (not malformed)

    def __str__(self) -> str:
        return f"{self.source}: {self.reason}"


@dataclass(frozen=True, slots=True)
class HostsAnswer:
    """A hosts answer: the records (empty: NODATA) and the lines they came from (or that named the name)."""

    records: tuple[RR, ...]
    sources: tuple[Source, ...]


@dataclass(slots=True)
class HostsTable:
    """The names and addresses of every --hosts file, merged in the order the files are given."""

    names: dict[str, list[tuple[str, Source]]] = field(default_factory=dict)  # name -> [(ip, where)]
    ptrs: dict[str, list[tuple[str, Source]]] = field(default_factory=dict)  # reverse name -> [(name, where)]
    entries: int = 0  # (address, name) pairs

    def lookup(self, qname: str, qtype: int, ttl: int) -> HostsAnswer | None:
        """The answer for a question (module docstring), or None when the name is not in the files."""
        if qtype == QT.PTR:
            owners = self.ptrs.get(qname)
            if owners is not None:
                return HostsAnswer(tuple(RR(qname, QT.PTR, ttl, name) for name, _ in owners),
                                   tuple(src for _, src in owners))
        addresses = self.names.get(qname)
        if addresses is None:
            return None
        want = 6 if qtype == QT.AAAA else 4 if qtype == QT.A else 0
        if not want:
            return HostsAnswer((), (addresses[0][1],))
        hits = [(ip, src) for ip, src in addresses if (6 if is_ipv6(ip) else 4) == want]
        if not hits:
            return HostsAnswer((), (addresses[0][1],))
        return HostsAnswer(tuple(RR(qname, qtype, ttl, ip) for ip, _ in hits), tuple(src for _, src in hits))

    def wire_names(self) -> frozenset[bytes]:
        """Every name the table answers (forward and reverse) in the lowercase wire form of a cache key."""
        out = set()
        for name in (*self.names, *self.ptrs):
            out.add(b"".join(bytes((len(label),)) + label.encode() for label in name.split(".")) + b"\x00")
        return frozenset(out)


def parse(path: str, text: str, table: HostsTable, *, excluded: Callable[[str], bool]) -> list[Problem]:
    """Add the lines of one file to `table`; the lines skipped or ignored, in order."""
    problems: list[Problem] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        fields = raw.partition("#")[0].split()
        if not fields:
            continue
        where = Source(path, number)
        ip = canonical_ip(fields[0])
        if ip is None:
            problems.append(Problem(where, f"{_shown(fields[0])} is not an IP address; line skipped"))
            continue
        if len(fields) == 1:
            problems.append(Problem(where, f"{ip} has no name; line skipped"))
            continue
        names = [normalize_name(f) for f in fields[1:]]
        bad = next(((f, why) for f, n in zip(fields[1:], names, strict=True)
                    if (why := name_problem(n)) is not None), None)
        if bad is not None:
            problems.append(Problem(where, f"the name {_shown(bad[0])}: {bad[1]}; line skipped"))
            continue
        kept = _add(table, ip, names, where, excluded, problems)
        table.entries += kept
    return problems


def _add(table: HostsTable, ip: str, names: Sequence[str], where: Source, excluded: Callable[[str], bool],
         problems: list[Problem]) -> int:
    kept = 0
    reverse = table.ptrs.setdefault(reverse_name(ip), [])
    for name in names:
        if excluded(name):
            problems.append(Problem(where, f"{name} is in a zone this agent serves from the cluster (the cluster "
                                           "answers it); name ignored", ignored=True))
            continue
        addresses = table.names.setdefault(name, [])
        if all(a != ip for a, _ in addresses):
            addresses.append((ip, where))
            kept += 1
        if all(n != name for n, _ in reverse):
            reverse.append((name, where))
    if not reverse:
        del table.ptrs[reverse_name(ip)]
    return kept


def build(files: Iterable[tuple[str, str]], *, excluded: Callable[[str], bool]) -> tuple[HostsTable, list[Problem]]:
    """The table of these (path, text) pairs, in order, and every line skipped or ignored."""
    table = HostsTable()
    problems: list[Problem] = []
    for path, text in files:
        problems.extend(parse(path, text, table, excluded=excluded))
    return table, problems


def _shown(text: str) -> str:
    """A field for a log line: quoted, at most 64 characters, non-printable characters escaped."""
    return repr(text[:64] + ("..." if len(text) > 64 else ""))
