"""--hosts files: the compact table (nodedns.serve.hosts) and their reading (nodedns.serve.hostswatch), in this
process: the answers, the caps, the problems counted and sampled, files that are not regular or do not answer."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from nodedns.dns.wire import QT
from nodedns.serve import hosts, hostswatch
from nodedns.serve.hosts import MAX_ANSWER_RECORDS, HostsTable
from nodedns.serve.hostswatch import HostsFiles


def cluster(name: str) -> bool:
    return name.endswith(".cluster.local")


def table_of(text: str, **kw: int) -> tuple[HostsTable, hosts.Problems]:
    builder = hosts.Builder(excluded=cluster, **kw)
    problems = builder.add_text("/h", text)
    return HostsTable(builder.finish()), problems


def test_the_table_answers_as_the_hosts_plugin_in_file_order() -> None:
    table, problems = table_of("10.0.0.2 b.example a.example\n10.0.0.1 A.Example.\n2001:db8::1 a.example\n"
                               "10.0.0.2 a.example\n10.0.0.9 ghost.default.svc.cluster.local\n")
    answer = table.lookup("a.example", QT.A, 5)
    assert answer is not None and [r.data for r in answer.records] == ["10.0.0.2", "10.0.0.1"]  # the repeat once
    assert [str(s) for s in answer.sources] == ["/h:1", "/h:2"]
    aaaa = table.lookup("a.example", QT.AAAA, 5)
    assert aaaa is not None and [r.data for r in aaaa.records] == ["2001:db8::1"]
    nodata = table.lookup("b.example", QT.AAAA, 5)
    assert nodata is not None and nodata.records == () and [str(s) for s in nodata.sources] == ["/h:1"]
    ptr = table.lookup("2.0.0.10.in-addr.arpa", QT.PTR, 5)
    assert ptr is not None and [r.data for r in ptr.records] == ["b.example", "a.example"]
    assert table.lookup("9.0.0.10.in-addr.arpa", QT.PTR, 5) is None  # its only name is the cluster's
    assert table.lookup("nope.example", QT.A, 5) is None
    assert table.entries == 4 and table.names == 2 and problems.ignored == 1 and problems.skipped == 0
    assert table.names_wire(b"\x01a\x07example\x00") and not table.names_wire(b"\x01c\x07example\x00")
    assert table.names_wire(b"\x012\x010\x010\x0210\x07in-addr\x04arpa\x00")


def test_an_answer_holds_at_most_the_first_records_in_file_order() -> None:
    many = "".join(f"0.0.0.0 blocked{i}.example\n" for i in range(200))
    many += "".join(f"10.0.{i // 256}.{i % 256} wide.example\n" for i in range(100))
    table, _ = table_of(many)
    ptr = table.lookup("0.0.0.0.in-addr.arpa", QT.PTR, 5)
    first = [f"blocked{i}.example" for i in range(MAX_ANSWER_RECORDS)]
    assert ptr is not None and [r.data for r in ptr.records] == first
    a = table.lookup("wide.example", QT.A, 5)
    assert a is not None and len(a.records) == MAX_ANSWER_RECORDS and a.records[0].data == "10.0.0.0"


def test_lines_over_the_entry_cap_are_skipped_and_counted() -> None:
    table, problems = table_of("".join(f"0.0.0.0 n{i}.example\n" for i in range(15)), max_entries=10)
    assert table.entries == 10 and problems.skipped == 5
    assert table.lookup("n9.example", QT.A, 5) is not None and table.lookup("n10.example", QT.A, 5) is None
    assert "over 10 entries" in str(problems.sample[0])
    # a line whose names would cross the cap is skipped whole; a shorter one after it still fits
    table, problems = table_of("".join(f"0.0.0.0 n{i}.example\n" for i in range(8)) +
                               "10.0.0.1 x.example y.example z.example\n10.0.0.2 w.example\n", max_entries=10)
    assert table.entries == 9 and problems.skipped == 1 and table.lookup("x.example", QT.A, 5) is None
    assert table.lookup("w.example", QT.A, 5) is not None


def test_junk_is_counted_and_only_a_sample_kept() -> None:
    table, problems = table_of("".join(f"junk{i} line\n" for i in range(10_000)) + "10.0.0.1 ok.example\n")
    assert problems.skipped == 10_000 and len(problems.sample) == hosts.SAMPLE and table.entries == 1
    assert str(problems.sample[0]) == "/h:1: 'junk0' is not an IP address; line skipped"


def shared(text: str) -> tuple[HostsTable, int]:
    builder = hosts.Builder(excluded=cluster)
    builder.add_text("/h", text)
    return hostswatch.share(builder.finish())


def test_a_worker_gets_the_table_over_its_socket_without_any_proc_access(monkeypatch: pytest.MonkeyPatch) -> None:
    """The supervisor passes the table's memfd (SCM_RIGHTS) on the worker's table socket; the worker maps it with
    /proc closed to it (a hardened container): the same answers; an older reading's fd queued before is skipped
    and closed; a size that is not the table's is refused; nobody can write the table (the memfd is sealed)."""
    old, old_fd = shared("10.0.0.9 a.example\n")
    table, fd = shared("10.0.0.1 a.example\n")
    supervisor, worker = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    real_open, real_os_open = open, os.open

    def no_proc(path: Any, *args: Any, **kw: Any) -> Any:
        if str(path).startswith("/proc"):
            raise PermissionError(13, "Permission denied", str(path))
        return (real_os_open if isinstance(args[0] if args else None, int) else real_open)(path, *args, **kw)

    monkeypatch.setattr(os, "open", lambda path, *a, **kw: no_proc(path, *a, **kw))
    monkeypatch.setattr("builtins.open", no_proc)
    try:
        with supervisor, worker:
            worker.setblocking(False)
            hostswatch.pass_table(supervisor, old_fd, 1)
            hostswatch.pass_table(supervisor, fd, 2)
            other = hostswatch.receive_table(worker, table.size, 2)  # as a worker maps the supervisor's
            answer = other.lookup("a.example", QT.A, 5)
            assert answer is not None and answer.records[0].data == "10.0.0.1" and other.files == ["/h"]
            with pytest.raises(ValueError, match="not passed"):
                hostswatch.receive_table(worker, table.size, 2)  # taken once; nothing queued now
            hostswatch.pass_table(supervisor, fd, 3)
            with pytest.raises(ValueError, match="not 1"):
                hostswatch.receive_table(worker, 1, 3)
        with pytest.raises(PermissionError):
            os.write(fd, b"x")  # sealed: not even the supervisor's fd writes it
        with pytest.raises(OSError):
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)
        os.close(old_fd)


def files_of(*paths: Path, **kw: float) -> HostsFiles:
    return HostsFiles([str(p) for p in paths], excluded=cluster, **kw)  # type: ignore[arg-type]


async def test_a_fifo_a_directory_and_a_device_are_refused_at_once_and_the_other_files_read(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    good = tmp_path / "good"
    good.write_text("10.0.0.1 good.example\n")
    files = files_of(fifo, tmp_path, Path("/dev/zero"), good)
    started = time.monotonic()
    assert await files.poll_once()
    assert time.monotonic() - started < 2.0  # no wait for a writer of the FIFO, no read of the device
    errors = [f["error"] for f in files.status()["files"]]
    assert "a FIFO, not a regular file" in errors[0] and "a directory" in errors[1]
    assert "a character device" in errors[2] and errors[3] == ""
    assert files.table.lookup("good.example", QT.A, 5) is not None
    good.write_text("10.0.0.2 good.example\n")  # a reload of another file goes on
    os.utime(good, ns=(0, time.time_ns() + 10**9))
    assert await files.poll_once()
    answer = files.table.lookup("good.example", QT.A, 5)
    assert answer is not None and answer.records[0].data == "10.0.0.2"
    files.close()


async def test_a_read_that_does_not_return_is_given_up_and_not_started_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    slow, good = tmp_path / "slow", tmp_path / "good"
    slow.write_text("10.0.0.1 slow.example\n")
    good.write_text("10.0.0.2 good.example\n")
    release = asyncio.Event()
    hung = __import__("threading").Event()
    real = hostswatch._read

    def read(path: str, limit: int = hostswatch.MAX_HOSTS_BYTES) -> tuple[tuple[int, int, int, int], bytes]:
        if path == str(slow):
            hung.wait(30)  # a file system that does not answer
        return real(path, limit)

    monkeypatch.setattr(hostswatch, "_read", read)
    files = files_of(slow, good, read_timeout=0.3)
    started = time.monotonic()
    assert await files.poll_once()
    assert time.monotonic() - started < 2.0
    first = files.status()["files"][0]["error"]
    assert "no answer from the file system within 0.3s" in first
    assert files.table.lookup("good.example", QT.A, 5) is not None
    assert not await files.poll_once()
    assert "an earlier read has not returned" in files.status()["files"][0]["error"]
    hung.set()
    release.set()
    await asyncio.sleep(0.2)
    assert await files.poll_once()  # the thread returned: read again
    assert files.table.lookup("slow.example", QT.A, 5) is not None
    files.close()


async def test_skipped_lines_are_logged_once_per_reading_with_a_sample(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    junk = tmp_path / "junk"
    junk.write_text("".join(f"junk{i} x\n" for i in range(5000)))
    files = files_of(junk)
    with caplog.at_level(logging.INFO, logger="nodedns.hostswatch"):
        await files.poll_once()
    lines = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(lines) == 1 and "5000 lines skipped" in lines[0] and f"{junk}:1: 'junk0'" in lines[0]
    assert files.status()["files"][0]["skipped"] == 5000 and files.status()["errors"] == 5000
    files.close()


@pytest.mark.parametrize("chunk", [1, 2, 5, 1 << 20])
def test_a_file_is_read_a_chunk_at_a_time_into_the_lines_splitlines_gives(chunk: int) -> None:
    import random

    rng = random.Random(chunk)
    for _ in range(500):
        text = "".join(rng.choice("ab \n\r\x0c#") for _ in range(rng.randint(0, 60)))
        assert list(hosts._lines(text, chunk)) == text.splitlines(), repr(text)


def test_a_reading_received_leaves_the_next_one_queued_behind_it() -> None:
    """Two readings passed in a row (the supervisor re-read the files before the worker took the first):
    the worker maps the first, and the second is still there for its own Hosts message."""
    first, first_fd = shared("10.0.0.1 a.example\n")
    second, second_fd = shared("10.0.0.2 a.example\n")
    supervisor, worker = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        with supervisor, worker:
            worker.setblocking(False)
            hostswatch.pass_table(supervisor, first_fd, 1)
            hostswatch.pass_table(supervisor, second_fd, 2)
            one = hostswatch.receive_table(worker, first.size, 1)
            two = hostswatch.receive_table(worker, second.size, 2)
            for table, address in ((one, "10.0.0.1"), (two, "10.0.0.2")):
                answer = table.lookup("a.example", QT.A, 5)
                assert answer is not None and answer.records[0].data == address
    finally:
        os.close(first_fd)
        os.close(second_fd)
