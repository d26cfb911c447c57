"""Reading a file a tenant or an operator may have put anything in the place of: only a regular file,
opened without waiting for a writer (a FIFO opens at once with O_NONBLOCK and is then refused), and
refused from its size before it is read when over a limit."""

from __future__ import annotations

import os
import stat

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class NotReadable(OSError):
    """A file refused before it is read (not a regular file, too large): the reason is its text."""


def kind(mode: int) -> str:
    """What a file that is not a regular one is ("a FIFO", "a directory", ...)."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def read_regular(path: str, limit: int) -> tuple[os.stat_result, bytes]:
    """The file's stat and bytes. Raises NotReadable (not a regular file; over `limit` bytes, from its size
    or from what a read gave) or OSError (it cannot be opened or read)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO opens at once, without a writer
    with open(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotReadable(f"{kind(st.st_mode)}, not a regular file: refused")
        if st.st_size > limit:
            raise NotReadable(f"{st.st_size} bytes, over {_size(limit)}: refused")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise NotReadable(f"over {_size(limit)}: refused")
    return st, data


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 and not limit & ((1 << 20) - 1) else f"{limit} bytes"
