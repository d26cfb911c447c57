"""Mutations of nodedns/dns/keys.py (the cache key of a query: fast_key, make_key, patch, key_query)."""

from mutate import Mutation

TESTS = (
    "tests/unit/dns/test_wire.py",
    "tests/unit/dns/test_wire_key.py",
    "tests/unit/forward/test_forward.py",
    "tests/unit/serve/test_interop.py",
)

MUTATIONS = (
    Mutation(
        "fast-key-reads-an-edns-version-as-zero",
        "nodedns/dns/keys.py",
        "        if data[qend + 6] != 0:  # EDNS version other than 0: the slow path answers BADVERS",
        "        if False:  # EDNS version other than 0: the slow path answers BADVERS",
        ("tests/unit/dns/test_wire.py", "tests/unit/serve/test_interop.py"),
        "a query with EDNS version 1 gets the stored answer instead of BADVERS (RFC 6891)",
    ),
    Mutation(
        "fast-key-serves-nsid-queries-from-the-store",
        "nodedns/dns/keys.py",
        "        if code == OPT_NSID or pos > end:",
        "        if pos > end:",
        ("tests/unit/dns/test_wire.py", "tests/unit/serve/test_interop.py"),
        "a query asking for the NSID (RFC 5001) gets a stored answer without our identity",
    ),
)
