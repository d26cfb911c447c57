"""Mutations of nodedns/dns/identity.py (CH TXT id.server., version.bind., NSID)."""

from mutate import Mutation

TESTS = ("tests/unit/serve/test_interop.py",)

VERSION = "tests/unit/serve/test_interop.py::test_other_ch_questions_are_refused_unless_a_version_reply_is_set"

MUTATIONS = (
    Mutation("version-bind-answered-when-unset", "nodedns/dns/identity.py",
             "        if qname in VERSION_NAMES and self.version:", "        if qname in VERSION_NAMES:", (VERSION,),
             "version.bind. gets an empty TXT instead of REFUSED when no --version-reply is set"),
    Mutation("host-name-wins-over-the-node-name", "nodedns/dns/identity.py",
             "    return Identity(node_name or hostname, version)",
             "    return Identity(hostname or node_name, version)",
             ("tests/unit/serve/test_interop.py::test_id_server_and_hostname_bind_answer_the_node_name",),
             "id.server. and NSID give the host name, not --node-name (a Pod's host name on a DaemonSet)"),
)
