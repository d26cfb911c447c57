"""Local records from hosts(5) files (--hosts): the text parsed into a compact table of names and addresses.

A line is `IP CANONICAL [ALIAS...]`, fields split by blanks, `#` to the end of the line a comment
(hosts(5)); IPv4 and IPv6 addresses. Names are matched without regard to case (stored lowercase, no
trailing dot). The table answers as CoreDNS's `hosts` plugin does with `fallthrough`:

    A / AAAA for a hosts name        its addresses of that family in file order (AA); none of
                                     that family: NODATA (NOERROR, AA, no records, no SOA)
    any other type for a hosts name  NODATA (as CoreDNS: the name exists, the type does not)
    PTR for a hosts address          every name given to it (canonical and aliases), in file order
    anything else                    not ours (None): the query goes on (forwarded)

An answer holds at most MAX_ANSWER_RECORDS records (the first in file order): a blocklist gives one
address (0.0.0.0) hundreds of thousands of names, and its PTR must not render them all.

Sized for blocklists: `Builder` takes the lines into flat arrays (one entry per distinct address and
name pair, at most MAX_ENTRIES) and `finish` lays them out as one buffer of arrays (`HostsTable`):
names and addresses sorted by a 64-bit hash of their text (looked up with `bisect`), their records as
index arrays, every name and address once as bytes. No Python object per line or per name is kept,
and the buffer can be shared: `HostsTable(buffer)` reads one in place (an mmap of the supervisor's
memfd in a worker, nodedns.serve.hostswatch).

Nothing here reads a file (nodedns.serve.hostswatch does). A malformed line (an IP `canonical_ip` refuses,
a name `names.name_problem` refuses, an IP with no name) is counted with its file and line and
skipped; so is a name inside a zone the agent serves (`excluded`: the cluster zone wins), counted as
ignored. The first SAMPLE problems of a file are kept for its one log line; the rest are counted
only. The TTL of every record is the caller's (the agent uses --ttl).
"""

from __future__ import annotations

import bisect
import collections
import itertools
import mmap
import operator
import struct
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from nodedns.dns.pack import RR
from nodedns.dns.wire import QT
from nodedns.names import canonical_ip, is_wire_name, name_problem, reverse_to_ip

MAX_ENTRIES = 1 << 19  # distinct (address, name) pairs over every file: lines beyond are skipped, counted
MAX_ANSWER_RECORDS = 32  # records in one answer (the first in file order)
SAMPLE = 5  # problems of a file kept for its log line; the others are counted
IP_MEMO = 4096  # address fields remembered per file as written (a blocklist's one or two, not a file of many)
MAGIC = b"nodedns hosts table 1\n"


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


@dataclass(slots=True)
class Problems:
    """What one file's reading skipped: counts, and the first SAMPLE problems (for one log line)."""

    skipped: int = 0  # malformed lines (and lines over MAX_ENTRIES)
    ignored: int = 0  # names in a zone the agent serves
    sample: list[Problem] = field(default_factory=list)

    def add(self, problem: Problem) -> None:
        if problem.ignored:
            self.ignored += 1
        else:
            self.skipped += 1
        if len(self.sample) < SAMPLE:
            self.sample.append(problem)


@dataclass(frozen=True, slots=True)
class HostsAnswer:
    """A hosts answer: the records (empty: NODATA) and the lines they came from (or that named the name)."""

    records: tuple[RR, ...]
    sources: tuple[Source, ...]


def text_hash(data: bytes) -> int:
    """The 64-bit hash names and addresses are sorted and found by (the same in every process)."""
    return (zlib.crc32(data) << 32) | zlib.adler32(data)


# the table's arrays, in the buffer's order: (name, typecode)
_SECTIONS = (
    ("name_hash", "Q"), ("name_off", "I"), ("name_blob", "B"), ("name_rec", "I"),  # names, sorted by hash
    ("rec_addr", "I"), ("rec_file", "H"), ("rec_line", "I"),  # each name's addresses, in file order
    ("addr_hash", "Q"), ("addr_off", "I"), ("addr_blob", "B"), ("addr_ptr", "I"),  # addresses, sorted by hash
    ("ptr_name", "I"), ("ptr_file", "H"), ("ptr_line", "I"),  # each address's names, in file order
    ("files", "B"),  # the paths, "\0" between them
)
_HEAD = struct.Struct("=QQ")  # entries, section count; then (offset, length) of each section


class HostsTable:
    """The names and addresses of every --hosts file, merged in the order the files are given, as arrays
    over one buffer (bytes, or an mmap shared with the process that built it)."""

    def __init__(self, buffer: bytes | bytearray | memoryview | mmap.mmap | None = None) -> None:
        if buffer is None:
            buffer = _empty()
        view = memoryview(buffer)
        if bytes(view[:len(MAGIC)]) != MAGIC:
            raise ValueError("not a hosts table")
        pos = len(MAGIC)
        self.entries, count = _HEAD.unpack_from(view, pos)
        if count != len(_SECTIONS):
            raise ValueError("a hosts table of another layout")
        pos += _HEAD.size
        arrays = []
        for _name, code in _SECTIONS:
            offset, length = struct.unpack_from("=QQ", view, pos)
            pos += 16
            arrays.append(view[offset:offset + length].cast(code))  # type: ignore[call-overload]
        (self._name_hash, self._name_off, self._name_blob, self._name_rec, self._rec_addr, self._rec_file,
         self._rec_line, self._addr_hash, self._addr_off, self._addr_blob, self._addr_ptr, self._ptr_name,
         self._ptr_file, self._ptr_line, files) = arrays
        self.files = bytes(files).decode("utf-8", "surrogateescape").split("\0") if len(files) else []
        self.buffer = buffer
        self.size = len(view)

    @property
    def names(self) -> int:
        """How many names the table answers."""
        return len(self._name_hash)

    # -- lookup ---------------------------------------------------------------------------

    def _find(self, hashes: memoryview, offsets: memoryview, blob: memoryview, text: str) -> int:
        data = text.encode("utf-8", "surrogateescape")
        h = text_hash(data)
        i = bisect.bisect_left(hashes, h)
        while i < len(hashes) and hashes[i] == h:
            if blob[offsets[i]:offsets[i + 1]] == data:
                return i
            i += 1
        return -1

    def _name(self, i: int) -> str:
        return bytes(self._name_blob[self._name_off[i]:self._name_off[i + 1]]).decode()

    def _addr(self, i: int) -> str:
        return bytes(self._addr_blob[self._addr_off[i]:self._addr_off[i + 1]]).decode()

    def _source(self, file: int, line: int) -> Source:
        return Source(self.files[file], line)

    def lookup(self, qname: str, qtype: int, ttl: int) -> HostsAnswer | None:
        """The answer for a question (module docstring), or None when the name is not in the files."""
        if qtype == QT.PTR:
            ip = reverse_to_ip(qname)
            a = self._find(self._addr_hash, self._addr_off, self._addr_blob, ip) if ip is not None else -1
            if a >= 0 and self._addr_ptr[a] < self._addr_ptr[a + 1]:  # (every name of its lines ignored: none)
                span = range(self._addr_ptr[a], min(self._addr_ptr[a + 1], self._addr_ptr[a] + MAX_ANSWER_RECORDS))
                return HostsAnswer(tuple(RR(qname, QT.PTR, ttl, self._name(self._ptr_name[j])) for j in span),
                                   tuple(self._source(self._ptr_file[j], self._ptr_line[j]) for j in span))
        i = self._find(self._name_hash, self._name_off, self._name_blob, qname)
        if i < 0:
            return None
        first, end = self._name_rec[i], self._name_rec[i + 1]
        want = 6 if qtype == QT.AAAA else 4 if qtype == QT.A else 0
        hits: list[tuple[str, Source]] = []
        if want:
            for j in range(first, end):
                ip = self._addr(self._rec_addr[j])
                if (6 if ":" in ip else 4) == want:
                    hits.append((ip, self._source(self._rec_file[j], self._rec_line[j])))
                    if len(hits) == MAX_ANSWER_RECORDS:
                        break
        if not hits:
            return HostsAnswer((), (self._source(self._rec_file[first], self._rec_line[first]),))
        return HostsAnswer(tuple(RR(qname, qtype, ttl, ip) for ip, _ in hits), tuple(src for _, src in hits))

    def names_wire(self, wire: bytes) -> bool:
        """Whether the table answers this name, given in the lowercase wire form of a cache key's question
        (forward names, and reverse names of its addresses)."""
        labels = []
        pos = 0
        while pos < len(wire) and wire[pos]:
            n = wire[pos]
            labels.append(wire[pos + 1:pos + 1 + n].decode("ascii", "replace"))
            pos += 1 + n
        name = ".".join(labels)
        if self._find(self._name_hash, self._name_off, self._name_blob, name) >= 0:
            return True
        ip = reverse_to_ip(name)
        a = self._find(self._addr_hash, self._addr_off, self._addr_blob, ip) if ip is not None else -1
        return a >= 0 and self._addr_ptr[a] < self._addr_ptr[a + 1]


class Builder:
    """Lines taken into flat arrays (`add_text`), then laid out as a table (`finish`). Every (name, address)
    pair a line gives is appended as it comes (its name's bytes to one blob, its hash, its address's
    number, its file and line): no dictionary of names, no object per line; `finish` sorts them."""

    def __init__(self, *, excluded: Callable[[str], bool], max_entries: int = MAX_ENTRIES) -> None:
        self.excluded = excluded
        self.max_entries = max_entries
        self.files: list[str] = []
        self._addrs: dict[bytes, int] = {}
        self._blob = bytearray()  # each pair's name, one after the other
        self._off = array("I", [0])  # where each pair's name starts in `_blob` (and where the last ends)
        self._hash = array("Q")  # each pair's name's hash
        self._p_addr = array("I")
        self._p_file = array("H")
        self._p_line = array("I")

    @property
    def entries(self) -> int:
        return len(self._hash)

    def add_text(self, path: str, text: str) -> Problems:
        """Add the lines of one file; what was skipped or ignored (counts and a sample)."""
        problems = Problems()
        if len(self.files) >= 0xFFFF:
            problems.add(Problem(Source(path, 0), "too many files; file skipped"))
            return problems
        file = len(self.files)
        self.files.append(path)
        # the loop runs once per line of files of hundreds of thousands: what it calls is bound here, the
        # addresses seen (a blocklist has one or two) looked up once each, a name checked in one match
        excluded, addrs, blob = self.excluded, self._addrs, self._blob
        add_off, add_hash, add_addr, add_line = (self._off.append, self._hash.append, self._p_addr.append,
                                                 self._p_line.append)
        add_file = self._p_file.append
        crc32, adler32 = zlib.crc32, zlib.adler32
        seen: dict[str, int] = {}  # an address field as written -> its number in `addrs` (at most IP_MEMO)
        entries = self.entries
        for number, raw in enumerate(_lines(text), start=1):
            fields = (raw.partition("#")[0] if "#" in raw else raw).split()
            if not fields:
                continue
            first = fields[0]
            addr = seen.get(first, -1)
            ip = None
            if addr < 0:
                ip = canonical_ip(first)
                if ip is None:
                    problems.add(Problem(Source(path, number), f"{_shown(first)} is not an IP address; line skipped"))
                    continue
            if len(fields) == 1:
                problems.add(Problem(Source(path, number), f"{ip or canonical_ip(first)} has no name; line skipped"))
                continue
            if entries >= self.max_entries:  # the table is full: no name of this line is read
                problems.add(Problem(Source(path, number), f"over {self.max_entries} entries in all; line skipped"))
                continue
            names = []
            bad = None
            for f in fields[1:]:
                name = f.lower()
                if name[-1] == ".":
                    name = name[:-1]
                if not is_wire_name(name):
                    bad = (f, name_problem(name) or "not a host name")
                    break
                names.append(name)
            if bad is not None:
                problems.add(Problem(Source(path, number), f"the name {_shown(bad[0])}: {bad[1]}; line skipped"))
                continue
            if entries + len(names) > self.max_entries:
                problems.add(Problem(Source(path, number), f"over {self.max_entries} entries in all; line skipped"))
                continue
            if addr < 0:
                addr = addrs.setdefault(ip.encode(), len(addrs))  # type: ignore[union-attr]  # set above
                if len(seen) < IP_MEMO:
                    seen[first] = addr
            for name in names:
                if excluded(name):
                    problems.add(Problem(Source(path, number), f"{name} is in a zone this agent serves from the "
                                         "cluster (the cluster answers it); name ignored", ignored=True))
                    continue
                data = name.encode()
                blob += data
                add_off(len(blob))
                add_hash((crc32(data) << 32) | adler32(data))  # text_hash
                add_addr(addr)
                add_file(file)
                add_line(number)
                entries += 1
        return problems

    def finish(self) -> bytearray:
        """The table's buffer (`HostsTable(buffer)` reads it); the builder is emptied. A pair given again
        (the same name and address on a later line) is kept once, at its first line."""
        blob, off, hashes = self._blob, self._off, self._hash
        p_addr, p_file, p_line = self._p_addr, self._p_file, self._p_line
        addr_bytes, self._addrs = list(self._addrs), {}
        self._blob, self._off, self._hash = bytearray(), array("I", [0]), array("Q")
        self._p_addr, self._p_file, self._p_line = array("I"), array("H"), array("I")
        count = len(hashes)
        # the pairs by their name's hash, each hash's in file order (a stable sort): equal names are together
        order = sorted(range(count), key=hashes.__getitem__)
        name_hash, name_off, name_blob, name_rec = array("Q"), array("I", [0]), bytearray(), array("I", [0])
        keep = bytearray(count)  # the pairs kept (the first of each name and address), by pair
        name_of = array("I", bytes(4 * count))  # each pair's name number in the table
        kept_by_name = array("I")  # the kept pairs, by name (hash order), each name's in file order
        sorted_hashes = array("Q", map(hashes.__getitem__, order))
        if count < 2 or all(map(operator.lt, sorted_hashes, itertools.islice(sorted_hashes, 1, None))):
            # every name once (a blocklist): each pair is kept and is its name's one record, in hash order
            name_hash = sorted_hashes
            name_blob = bytearray(b"".join([blob[off[k]:off[k + 1]] for k in order]))
            name_off.extend(itertools.accumulate(map(operator.sub, map(off.__getitem__, map((1).__add__, order)),
                                                     map(off.__getitem__, order))))
            keep = bytearray(b"\x01" * count)
            name_of = array("I", sorted(range(count), key=order.__getitem__))  # where each pair went
            kept_by_name = array("I", order)
            name_rec = array("I", range(count + 1))
        else:
            run = 0
            add_hash, add_off = name_hash.append, name_off.append
            add_rec, add_kept = name_rec.append, kept_by_name.append
            while run < count:  # a run of one hash: usually one name (a 64-bit hash rarely meets another)
                k = order[run]
                h = hashes[k]
                end = run + 1
                while end < count and hashes[order[end]] == h:
                    end += 1
                if end == run + 1:  # one pair of its hash: its name, kept (the common case, without sets)
                    name_of[k] = len(name_hash)
                    add_hash(h)
                    name_blob += blob[off[k]:off[k + 1]]
                    add_off(len(name_blob))
                    keep[k] = 1
                    add_kept(k)
                    add_rec(len(kept_by_name))
                    run = end
                    continue
                names: dict[bytes, list[int]] = {}
                for k in order[run:end]:
                    names.setdefault(bytes(blob[off[k]:off[k + 1]]), []).append(k)
                for data, pairs in names.items():
                    number = len(name_hash)
                    name_hash.append(h)
                    name_blob += data
                    name_off.append(len(name_blob))
                    seen: set[int] = set()
                    for k in pairs:
                        if p_addr[k] not in seen:
                            seen.add(p_addr[k])
                            keep[k] = 1
                            name_of[k] = number
                            kept_by_name.append(k)
                    name_rec.append(len(kept_by_name))
                run = end
        del order, blob, off, hashes
        crc32, adler32 = zlib.crc32, zlib.adler32
        ahashes = [(crc32(b) << 32) | adler32(b) for b in addr_bytes]  # text_hash
        addr_order = sorted(range(len(addr_bytes)), key=ahashes.__getitem__)
        addr_hash = array("Q", map(ahashes.__getitem__, addr_order))
        del ahashes
        addr_at = _inverse(addr_order)
        new_addr = array("I", map(addr_at.__getitem__, p_addr))
        by_addr = sorted(itertools.compress(range(count), keep), key=new_addr.__getitem__)  # file order within
        sections: dict[str, array[int] | bytes] = {
            "name_hash": name_hash,
            "name_off": name_off,
            "name_blob": bytes(name_blob),
            "name_rec": name_rec,
            "rec_addr": array("I", map(new_addr.__getitem__, kept_by_name)),
            "rec_file": array("H", map(p_file.__getitem__, kept_by_name)),
            "rec_line": array("I", map(p_line.__getitem__, kept_by_name)),
            "addr_hash": addr_hash,
            "addr_off": _offsets(map(addr_bytes.__getitem__, addr_order)),
            "addr_blob": b"".join(map(addr_bytes.__getitem__, addr_order)),
            "addr_ptr": _starts(map(new_addr.__getitem__, by_addr), len(addr_order)),
            "ptr_name": array("I", map(name_of.__getitem__, by_addr)),
            "ptr_file": array("H", map(p_file.__getitem__, by_addr)),
            "ptr_line": array("I", map(p_line.__getitem__, by_addr)),
            "files": "\0".join(self.files).encode("utf-8", "surrogateescape"),
        }
        return _layout(len(kept_by_name), [sections[name] for name, _code in _SECTIONS])


def _lines(text: str, chunk: int = 1 << 20) -> Iterator[str]:
    """The lines of `text` as `str.splitlines` gives them, a chunk of about `chunk` characters at a time (cut
    after a newline): no list of every line (a 16 MiB file is hundreds of thousands), no copy of the text."""
    start, end = 0, len(text)
    while start < end:
        cut = text.find("\n", start + chunk)
        cut = end if cut < 0 else cut + 1
        yield from text[start:cut].splitlines()
        start = cut


def _inverse(order: list[int]) -> array[int]:
    """Where each old index went: out[order[new]] = new."""
    out = array("I", bytes(4 * len(order)))
    for new, old in enumerate(order):
        out[old] = new
    return out


def _offsets(items: Iterable[bytes]) -> array[int]:
    out = array("I", [0])
    out.extend(itertools.accumulate(map(len, items)))
    return out


def _starts(keys: Iterable[int], count: int) -> array[int]:
    """Where each of `count` groups starts in a sequence sorted by group (and where the last ends)."""
    sizes = collections.Counter(keys)
    out = array("I", [0])
    out.extend(itertools.accumulate(map(sizes.__getitem__, range(count))))
    return out


def _layout(entries: int, sections: list[array[int] | bytes]) -> bytearray:
    """MAGIC, the head, the (offset, length) of each section, then the sections, each 8-byte aligned."""
    head = len(MAGIC) + _HEAD.size + 16 * len(sections)
    places, pos = [], head
    for data in sections:
        pos = (pos + 7) & ~7
        size = len(data) * (data.itemsize if isinstance(data, array) else 1)
        places.append((pos, size))
        pos += size
    out = bytearray(pos)
    out[:len(MAGIC)] = MAGIC
    _HEAD.pack_into(out, len(MAGIC), entries, len(sections))
    for i, ((offset, size), data) in enumerate(zip(places, sections, strict=True)):
        struct.pack_into("=QQ", out, len(MAGIC) + _HEAD.size + 16 * i, offset, size)
        out[offset:offset + size] = data.tobytes() if isinstance(data, array) else data
    return out


def _empty() -> bytearray:
    return Builder(excluded=lambda _name: False).finish()


def build(files: Iterable[tuple[str, str]], *, excluded: Callable[[str], bool]) -> tuple[HostsTable, list[Problems]]:
    """The table of these (path, text) pairs, in order, and what each file's reading skipped."""
    builder = Builder(excluded=excluded)
    problems = [builder.add_text(path, text) for path, text in files]
    return HostsTable(builder.finish()), problems


def _shown(text: str) -> str:
    """A field for a log line: quoted, at most 64 characters, non-printable characters escaped."""
    return repr(text[:64] + ("..." if len(text) > 64 else ""))
