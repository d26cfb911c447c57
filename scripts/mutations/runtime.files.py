"""Mutations of nodedns/runtime/files.py (only a regular file under a size is read, without waiting for a writer)."""

from mutate import Mutation

TESTS = ("tests/unit/serve/test_hosts.py", "tests/e2e/test_handover.py")

MUTATIONS = (
    Mutation(
        "hosts-fifo-opened-waiting-for-a-writer",
        "nodedns/runtime/files.py",
        "    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)",
        "    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)",
        ("tests/unit/serve/test_hosts.py::test_a_fifo_a_directory_and_a_device_are_refused_at_once_and_the_other_"
         "files_read",),
        "a FIFO in a hosts file's place blocks its reading until a writer comes (the start waits for ever)",
    ),
    Mutation(
        "hosts-any-file-read",
        "nodedns/runtime/files.py",
        "        if not stat.S_ISREG(st.st_mode):\n",
        "        if stat.S_ISDIR(st.st_mode):\n",
        ("tests/unit/serve/test_hosts.py::test_a_fifo_a_directory_and_a_device_are_refused_at_once_and_the_other_"
         "files_read",),
        "a device in a hosts file's place is read (/dev/zero: 16 MiB of zeros each period)",
    ),
)
