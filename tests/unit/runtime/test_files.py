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
