"""Reading a file only when it is a regular one under a size (nodedns/runtime/files.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nodedns.runtime.files import NotReadable, read_regular


def test_a_file_exactly_at_the_limit_is_read_and_one_byte_more_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 64)
    assert read_regular(str(path), 64)[1] == b"x" * 64
    path.write_bytes(b"x" * 65)
    with pytest.raises(NotReadable, match="65 bytes, over 64 bytes"):
        read_regular(str(path), 64)


def test_a_file_longer_than_its_size_says_is_refused_not_cut(tmp_path: Path) -> None:
    """The size from stat can understate what a read gives (a file growing between the two, procfs's
    files that say 0): what is read past the limit refuses the file, it is never cut at the limit."""
    status = "/proc/self/status"
    assert os.stat(status).st_size == 0 and len(Path(status).read_bytes()) > 64
    with pytest.raises(NotReadable, match="over 64 bytes"):
        read_regular(status, 64)


def test_a_fifo_is_refused_at_once_without_waiting_for_a_writer_and_named(tmp_path: Path) -> None:
    """docs/hardening.md: a file replaced by a FIFO is refused at once (not a regular file); the error names
    what it is (the `hosts` entry of /status shows it)."""
    path = tmp_path / "hosts"
    os.mkfifo(path)
    with pytest.raises(NotReadable, match=r"^a FIFO, not a regular file: refused$"):
        read_regular(str(path), 64)  # no writer ever comes: a blocking open would hang here


def test_a_device_is_refused_naming_what_it_is() -> None:
    with pytest.raises(NotReadable, match="^a character device, not a regular file: refused$"):
        read_regular("/dev/null", 64)


@pytest.mark.parametrize(("limit", "said"), [(16 << 20, "16 MiB"), ((1 << 20) + 1, f"{(1 << 20) + 1} bytes"),
                                             (1 << 20, "1 MiB"), ((1 << 20) - 1, f"{(1 << 20) - 1} bytes")])
def test_a_file_over_its_limit_is_refused_naming_the_limit_in_mib_when_it_is_whole_mib(
        tmp_path: Path, limit: int, said: str) -> None:
    path = tmp_path / "big"
    with path.open("wb") as fh:
        fh.truncate(limit + 1)  # sparse: its size says it, nothing is written
    with pytest.raises(NotReadable, match=f"^{limit + 1} bytes, over {said}: refused$"):
        read_regular(str(path), limit)
