"""The C hit path (nodedns/serve/_hitpath.c) called directly over real sockets: hits, misses handed back, the
cut for the client's UDP size, the build's hardening, and the Python path still there when it is turned
off. That it decides as the Python hit path does is tests/unit/serve/test_hitpath_differential.py (the two functions)
and tests/unit/serve/test_hit_paths.py (both, through the listener)."""

from __future__ import annotations

import ast
import os
import re
import shutil
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dns.exception
import dns.flags
import dns.message
import dns.query
import pytest

from nodedns.dns.keys import make_key
from nodedns.dns.truncate import truncate
from nodedns.dns.wire import KF_DO, KF_EDNS, KF_RD
from tests.support.helpers import EXAMPLE, IN_CI, ROOT, free_port, nodedns_cmd, require_c_extension, subprocess_env

_hitpath = require_c_extension("nodedns.serve._hitpath")

OPT_PLAIN = b"\x00\x00\x29" + b"\x10\x00" + b"\x00" * 6  # a bare OPT, payload 4096


def question(name: str = "web.default.svc.cluster.local", qtype: int = 1, *, qid: int = 0x1234,
             edns: bytes | None = None) -> bytes:
    wire = b"".join(bytes([len(label)]) + label.encode() for label in name.split(".")) + b"\x00"
    ar = 1 if edns is not None else 0
    return struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, ar) + wire + struct.pack("!HH", qtype, 1) + (edns or b"")


def stored(query: bytes, *, slot: int = 3, size: int = 60) -> bytes:
    """A stored response as the hot dict holds it: byte 0 the label slot, byte 1 unused (the ID goes
    there), then flags and counts, the query's question, as many A records (16 bytes each, the owner
    a pointer to the question) as bring it near `size`, and a bare OPT when the query ends with one."""
    qend = question_end(query)
    opt = query[qend:] if len(query) >= qend + 11 else b""
    n = max(0, (size - qend - len(opt)) // 16)
    records = b"".join(b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 5, 4) + bytes((10, 0, i >> 8, i & 0xFF))
                       for i in range(n))
    head = bytes([slot, 0]) + struct.pack("!HHHHH", 0x8180, 1, n, 0, 1 if opt else 0)
    return head + query[12:qend] + records + (b"\x00\x00\x29\x04\xd0" + b"\x00" * 6 if opt else b"")


def question_end(query: bytes) -> int:
    pos = 12
    while query[pos]:
        pos += query[pos] + 1
    return pos + 5


class Pair:
    """A non-blocking server socket and a client socket on loopback (IPv4 or IPv6)."""

    def __init__(self, family: int = socket.AF_INET) -> None:
        host = "::1" if family == socket.AF_INET6 else "127.0.0.1"
        self.srv = socket.socket(family, socket.SOCK_DGRAM)
        self.srv.bind((host, 0))
        self.srv.setblocking(False)
        self.cli = socket.socket(family, socket.SOCK_DGRAM)
        self.cli.bind((host, 0))
        self.cli.settimeout(1.0)
        self.addr = self.srv.getsockname()

    def send(self, *datagrams: bytes) -> None:
        for d in datagrams:
            self.cli.sendto(d, self.addr)

    def serve(self, table: dict[bytes, bytes], allowed: set[str], counts: list[int],
              max_udp: int = 1232, limit: Any = None) -> tuple[int, Any, int]:
        return _hitpath.serve(self.srv.fileno(), table, allowed, counts, max_udp, None, limit)

    def replies(self, n: int) -> list[bytes]:
        return [self.cli.recv(65535) for _ in range(n)]

    def close(self) -> None:
        self.srv.close()
        self.cli.close()


@pytest.fixture
def pair() -> Iterator[Pair]:
    p = Pair()
    yield p
    p.close()


def test_a_hit_is_answered_with_the_query_id_and_counted(pair: Pair) -> None:
    q = question()
    counts = [0] * 8
    pair.send(q)
    received, misses, dropped = pair.serve({q[2:]: stored(q)}, {"127.0.0.1"}, counts)
    assert (received, misses, dropped) == (1, None, 0)
    assert pair.replies(1) == [q[:2] + stored(q)[2:]]
    assert counts[3] == 1


def test_an_empty_queue_reads_nothing(pair: Pair) -> None:
    assert pair.serve({}, set(), [0]) == (0, None, 0)


def test_a_batch_of_hits_and_misses(pair: Pair) -> None:
    hit = question(qid=1)
    miss = question("other.default.svc.cluster.local", qid=2)
    counts = [0] * 8
    pair.send(hit, miss, question(qid=3))
    received, misses, _ = pair.serve({hit[2:]: stored(hit)}, {"127.0.0.1"}, counts)
    assert received == 3 and counts[3] == 2
    assert misses == [(miss, pair.cli.getsockname())]  # the address as socket.recvfrom gives it
    got = sorted(pair.replies(2))
    assert got == sorted([hit[:2] + stored(hit)[2:], question(qid=3)[:2] + stored(hit)[2:]])


def test_a_client_outside_the_allow_list_is_handed_back(pair: Pair) -> None:
    q = question()
    counts = [0] * 8
    pair.send(q)
    received, misses, _ = pair.serve({q[2:]: stored(q)}, {"10.0.0.1"}, counts)
    assert received == 1 and misses == [(q, pair.cli.getsockname())] and counts == [0] * 8


def test_a_bare_opt_is_keyed_without_it_and_the_payload_size_is_respected(pair: Pair) -> None:
    q = question(edns=OPT_PLAIN)
    small = question(edns=b"\x00\x00\x29\x02\x00" + b"\x00" * 6)  # payload 512
    big = stored(q, size=1500)
    qend = question_end(q)
    counts = [0] * 8
    pair.send(q, small)
    received, misses, _ = pair.serve({q[2:-11]: big}, {"127.0.0.1"}, counts, 1232)
    # 1500 bytes fit neither 4096 capped at max_udp 1232, nor 512: both cut to the whole records that fit
    assert received == 2 and misses is None
    assert pair.replies(2) == [q[:2] + truncate(big, qend, 1232)[2:], small[:2] + truncate(big, qend, 512)[2:]]
    pair.send(q)
    received, misses, _ = pair.serve({q[2:-11]: big}, {"127.0.0.1"}, counts, 4096)
    assert received == 1 and misses is None and pair.replies(1) == [q[:2] + big[2:]]


@pytest.mark.parametrize(
    ("edns", "max_udp", "limit"),
    [(None, 1232, 512), (OPT_PLAIN, 1232, 1232), (OPT_PLAIN, 4096, 4096),
     (b"\x00\x00\x29\x01\x00" + b"\x00" * 6, 1232, 512)],
    ids=["plain-512", "edns-capped-by-max-udp", "edns-4096", "edns-256-counts-as-512"],
)
def test_a_stored_answer_too_big_for_the_client_is_cut_to_whole_records_with_tc(
    pair: Pair, edns: bytes | None, max_udp: int, limit: int
) -> None:
    q = question("big.default.svc.cluster.local", edns=edns)
    qend = question_end(q)
    big = stored(q, size=6000)
    pair.send(q)
    received, misses, _ = pair.serve({q[2 : qend]: big}, {"127.0.0.1"}, [0] * 8, max_udp)
    assert received == 1 and misses is None
    (reply,) = pair.replies(1)
    m = dns.message.from_wire(reply)
    fits = (limit - qend - (11 if edns else 0)) // 16
    assert m.id == 0x1234 and m.flags & dns.flags.TC and len(reply) <= limit
    assert len(m.answer[0]) == fits and (m.edns == 0) == (edns is not None)
    assert reply == q[:2] + truncate(big, qend, limit)[2:]


def test_a_z_bit_query_never_reaches_a_do_key(pair: Pair) -> None:
    """A canonical DO=1 key is not what a query with Z=1 and a DO=0 OPT reads as (RFC 3225 section 3)."""
    plain = question(edns=OPT_PLAIN)
    do_key = make_key(plain[12:-11].lower(), KF_RD | KF_EDNS | KF_DO)
    z = bytearray(plain)
    z[3] |= 0x40  # Z
    lying = bytearray(plain)
    lying[10] = do_key[8]  # an ARCOUNT high byte like the DO key's: a count no query with one OPT has
    pair.send(bytes(z), bytes(lying))
    received, misses, _ = pair.serve({do_key: stored(plain)}, {"127.0.0.1"}, [0] * 8)
    assert received == 2 and misses is not None and [m[0] for m in misses] == [bytes(z), bytes(lying)]


@pytest.mark.parametrize("data", [b"", b"\x12", b"\x00" * 16, question()[:15]], ids=["empty", "one", "16", "short"])
def test_short_datagrams_are_handed_back_whole(pair: Pair, data: bytes) -> None:
    pair.send(data)
    received, misses, _ = pair.serve({}, {"127.0.0.1"}, [0])
    assert received == 1 and misses == [(data, pair.cli.getsockname())]


def test_a_big_datagram_is_read_whole(pair: Pair) -> None:
    data = question()[:12] + os.urandom(60000)
    pair.send(data)
    received, misses, _ = pair.serve({}, {"127.0.0.1"}, [0])
    assert received == 1 and misses[0][0] == data


def test_ipv6_clients_get_the_four_part_address() -> None:
    try:
        p = Pair(socket.AF_INET6)
    except OSError:
        pytest.skip("no IPv6 loopback here")
    try:
        q = question()
        p.send(q, question("nothing.example"))
        received, misses, _ = p.serve({q[2:]: stored(q)}, {"::1"}, [0] * 8)
        assert received == 2 and p.replies(1) == [q[:2] + stored(q)[2:]]
        assert misses is not None and misses[0][1] == p.cli.getsockname() and len(misses[0][1]) == 4
    finally:
        p.close()


def test_more_than_a_batch_is_read_in_several_calls(pair: Pair) -> None:
    q = question()
    counts = [0] * 8
    pair.send(*([q] * (_hitpath.BATCH + 5)))
    first = pair.serve({q[2:]: stored(q)}, {"127.0.0.1"}, counts)
    second = pair.serve({q[2:]: stored(q)}, {"127.0.0.1"}, counts)
    assert (first[0], second[0]) == (_hitpath.BATCH, 5) and counts[3] == _hitpath.BATCH + 5


def test_a_closed_socket_raises_oserror() -> None:
    p = Pair()
    fd = p.srv.fileno()
    p.close()
    with pytest.raises(OSError):
        _hitpath.serve(fd, {}, set(), [0], 1232)


def test_a_slot_past_the_counters_is_not_counted_and_not_a_crash(pair: Pair) -> None:
    q = question()
    pair.send(q)
    assert pair.serve({q[2:]: stored(q, slot=200)}, {"127.0.0.1"}, [0, 0])[0] == 1
    assert pair.replies(1)[0][2:] == stored(q, slot=200)[2:]


# ----------------------------------------------------------------------------------------------
# The rate limit (limits.RateLimiter): counted here while a client is under its budget


def test_a_client_under_its_rate_limit_is_answered_and_counted_and_the_rest_handed_to_the_limiter(pair: Pair) -> None:
    q = question()
    counts, rl, over = [0] * 8, {"127.0.0.1": 1}, []  # one reply this second already
    pair.send(*(question(qid=i) for i in range(6)))
    received, misses, _ = pair.serve({q[2:]: stored(q)}, {"127.0.0.1"}, counts, 1232, (rl, 4, 100, over))
    assert (received, misses) == (6, None)
    assert rl == {"127.0.0.1": 4} and counts[3] == 3  # three more under the budget of 4: answered here
    assert [int.from_bytes(r[:2], "big") for r in pair.replies(3)] == [0, 1, 2]
    assert over == [(question(qid=i), pair.cli.getsockname()) for i in (3, 4, 5)]  # not counted: take() decides


def test_misses_and_refused_clients_count_against_the_rate_limit_too(pair: Pair) -> None:
    rl: dict[str, int] = {}
    over: list[Any] = []
    pair.send(question("nothing.example", qid=1), question(qid=2), question(qid=3))
    received, misses, _ = pair.serve({}, set(), [0], 1232, (rl, 2, 100, over))
    assert received == 3 and rl == {"127.0.0.1": 2}  # a refusal is a reply (docs/hardening.md)
    assert [m[0] for m in misses] == [question("nothing.example", qid=1), question(qid=2)]
    assert [o[0] for o in over] == [question(qid=3)]


def test_a_new_client_when_the_rate_limit_table_is_full_is_handed_to_the_limiter(pair: Pair) -> None:
    q = question()
    rl, over = {"10.0.0.1": 1, "10.0.0.2": 1}, []
    pair.send(q, q)
    received, misses, _ = pair.serve({q[2:]: stored(q)}, {"127.0.0.1"}, [0] * 8, 1232, (rl, 5, 2, over))
    assert (received, misses) == (2, None)
    assert rl == {"10.0.0.1": 1, "10.0.0.2": 1} and len(over) == 2  # the overflow budget is take()'s to keep


def test_each_client_in_a_batch_has_its_own_rate_limit_count() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as srv, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) \
            as a, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as b:
        srv.bind(("127.0.0.1", 0))
        srv.setblocking(False)
        a.bind(("127.0.0.2", 0))
        b.bind(("127.0.0.3", 0))
        q = question()
        for sock in (a, b, a, b, a, a):  # runs of one address interleaved: each read and written back
            sock.sendto(q, srv.getsockname())
        rl: dict[str, int] = {"127.0.0.3": 2}
        over: list[Any] = []
        received, misses, _ = _hitpath.serve(srv.fileno(), {q[2:]: stored(q)}, {"127.0.0.2", "127.0.0.3"}, [0] * 8,
                                             1232, None, (rl, 3, 100, over))
        assert (received, misses) == (6, None)
        assert rl == {"127.0.0.2": 3, "127.0.0.3": 3}
        assert [o[1][0] for o in over] == ["127.0.0.3", "127.0.0.2"]


def test_a_malformed_limit_is_a_type_error(pair: Pair) -> None:
    with pytest.raises(TypeError):
        pair.serve({}, set(), [0], 1232, ({}, 5, 100))


def test_the_agent_uses_the_c_hit_path_unless_told_not_to(tmp_path: Any) -> None:
    for choice, expected in (("", "C hit path"), ("python", "Python hit path")):
        port = free_port()
        env = dict(subprocess_env(), NODEDNS_HIT_PATH=choice)
        log = tmp_path / f"serve-{choice or 'c'}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(nodedns_cmd("serve", "--manifests", str(EXAMPLE), "--listen", f"127.0.0.1:{port}",
                                                "--status-listen", "none", "--workers", "1", "--lameduck", "0s",
                                                "--upstream", "none"),
                                    env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            answers = []
            for _ in range(100):
                try:
                    r = dns.query.udp(dns.message.make_query("web.default.svc.cluster.local", "A"), "127.0.0.1",
                                      port=port, timeout=0.5)
                except (dns.exception.Timeout, OSError):
                    continue
                if not r.answer:  # SERVFAIL until the manifest is loaded
                    time.sleep(0.05)
                    continue
                answers.append(r)
                if len(answers) >= 5:
                    break
            assert len(answers) == 5 and all(a.answer[0][0].to_text() == "10.96.12.34" for a in answers)
        finally:
            proc.terminate()
            assert proc.wait(20) == 0
        assert expected in log.read_text()


def test_nothing_leaks_over_many_batches(pair: Pair) -> None:
    import gc
    import tracemalloc

    hit, miss = question(qid=7), question("nothing.example", qid=8)
    table = {hit[2:]: stored(hit)}
    counts = [0] * 8
    pair.cli.setblocking(False)

    def rounds(n: int) -> None:
        for _ in range(n):
            pair.send(hit, miss, hit, question(edns=OPT_PLAIN))
            while pair.serve(table, {"127.0.0.1"}, counts)[0]:
                pass
            with_replies = True
            while with_replies:
                try:
                    pair.cli.recv(65535)
                except BlockingIOError:
                    with_replies = False

    rounds(500)  # warm-up: counters past the small-int cache, buffers, free lists
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    rounds(5000)
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert counts[3] == 2 * 5500
    assert grown < 64 * 1024, f"{grown} bytes kept after 20,000 datagrams"


# ----------------------------------------------------------------------------------------------
# The build: hardened as distributions build network daemons (setup.py)

READELF = shutil.which("readelf")
requires_readelf = pytest.mark.skipif(READELF is None and not IN_CI, reason="readelf (binutils) is not installed")
# libc calls _FORTIFY_SOURCE replaces with a size-checked __<name>_chk when the buffer's size is known
FORTIFIABLE = ("memcpy", "memmove", "memset", "strcpy", "strncpy", "strcat", "strncat", "sprintf", "snprintf",
               "vsprintf", "vsnprintf", "read", "recv", "recvfrom", "fgets", "realpath", "getcwd", "gets")


def readelf(*args: str) -> str:
    assert READELF is not None
    r = subprocess.run([READELF, "-W", *args], capture_output=True, text=True, timeout=30, check=True)
    return r.stdout


def setup_flags(name: str) -> list[str]:
    """A list constant of setup.py (it calls setup() when imported)."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            value = ast.literal_eval(node.value)
            assert isinstance(value, list)
            return [str(v) for v in value]
    raise AssertionError(f"setup.py has no {name}")


def extensions() -> list[str]:
    """The built C extensions: the hit path and, built by the same setup.py with the same flags, the slice columns."""
    from nodedns.cluster import _slim

    return [_hitpath.__file__, _slim.__file__]


@requires_readelf
@pytest.mark.parametrize("which", [0, 1], ids=["hitpath", "slim"])
def test_the_extension_has_a_read_only_got_bound_at_load_time(which: int) -> None:
    so = extensions()[which]
    assert "GNU_RELRO" in readelf("-l", so)  # -z relro
    dynamic = readelf("-d", so)
    assert "BIND_NOW" in dynamic or re.search(r"FLAGS_1\).*\bNOW\b", dynamic)  # -z now


@requires_readelf
@pytest.mark.parametrize("which", [0, 1], ids=["hitpath", "slim"])
def test_the_extension_has_stack_canaries_and_no_unchecked_fortifiable_call(which: int) -> None:
    so = extensions()[which]
    imported = {m.group(1).split("@")[0] for m in re.finditer(r"\bUND\s+(\S+)", readelf("--dyn-syms", so))}
    assert "__stack_chk_fail" in imported  # -fstack-protector-strong: buffers on the stack (packets, addresses)
    unchecked = sorted(name for name in FORTIFIABLE if name in imported)
    assert not unchecked, f"libc calls left without _FORTIFY_SOURCE's checks: {unchecked}"
    info = readelf("--debug-dump=info", so) if ".debug_info" in readelf("-S", so) else ""
    producer = re.search(r"DW_AT_producer\s*:.*?:\s*(.*)", info)
    if producer:  # built with -g (Python's CFLAGS): gcc records the options it compiled with
        assert "-fstack-protector-strong" in producer.group(1)
        assert "-O2" in producer.group(1) or "-O3" in producer.group(1)  # _FORTIFY_SOURCE needs the optimizer


@requires_readelf
def test_the_build_flags_do_fortify_libc_calls(tmp_path: Path) -> None:
    """setup.py's flags, on a C file with a call glibc can check: __memcpy_chk, __stack_chk_fail, BIND_NOW."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler")
    src = tmp_path / "probe.c"
    src.write_text("#include <string.h>\nint probe(const char *s, size_t n) {\n  char buf[16];\n"
                   "  memcpy(buf, s, n);\n  return buf[0] + buf[15];\n}\n")
    so = tmp_path / "probe.so"
    subprocess.run([gcc, "-shared", "-fPIC", "-O2", *setup_flags("HARDENING_CFLAGS"), *setup_flags("HARDENING_LDFLAGS"),
                    "-o", str(so), str(src)], check=True, capture_output=True, timeout=60)
    imported = readelf("--dyn-syms", str(so))
    assert "__memcpy_chk" in imported and "__stack_chk_fail" in imported
    assert "BIND_NOW" in readelf("-d", str(so)) and "GNU_RELRO" in readelf("-l", str(so))
