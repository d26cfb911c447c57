"""Mutations of nodedns/podconf/noderesolv.py (the node's resolv.conf that Pod resolv.conf files are rendered from)."""

from mutate import Mutation

TESTS = ("tests/unit/test_config_readers.py",)

REREAD = ("tests/unit/test_config_readers.py::test_the_host_resolv_conf_is_read_again_and_an_unreadable_one_keeps_the_"
          "last_text")

MUTATIONS = (
    Mutation(
        "host-resolv-conf-decoded-strictly",
        "nodedns/podconf/noderesolv.py",
        'return fh.read(resolvconf.MAX_RESOLV_CONF_BYTES + 1).decode("utf-8", "surrogateescape")',
        'return fh.read(resolvconf.MAX_RESOLV_CONF_BYTES + 1).decode("utf-8")',
        (REREAD,),
        "a host resolv.conf with a non-UTF-8 byte is taken for unreadable (the kubelet reads it as bytes)",
    ),
    Mutation(
        "host-resolv-conf-logged-every-read",
        "nodedns/podconf/noderesolv.py",
        "        if reason == self._reported:\n            return\n",
        "",
        (REREAD,),
        "an unreadable host resolv.conf is counted and logged again every period",
    ),
    Mutation(
        "host-resolv-conf-first-read-counted-as-a-change",
        "nodedns/podconf/noderesolv.py",
        "        if not first:\n            self.changes += 1",
        "        if True:\n            self.changes += 1",
        (REREAD,),
        "the first read of the host resolv.conf is counted (and logged) as a change",
    ),
    Mutation(
        "host-resolv-conf-unreadable-for-good",
        "nodedns/podconf/noderesolv.py",
        "            self.unreadable_since = None\n            self._reported = None",
        "            self._reported = None",
        (REREAD,),
        "a host resolv.conf readable again still shows the HostResolvConfUnreadable condition",
    ),
)
