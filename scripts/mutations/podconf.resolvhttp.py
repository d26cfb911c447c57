"""Mutations of nodedns/podconf/resolvhttp.py (POST /v1/resolv-conf answered without a socket)."""

from mutate import Mutation

TESTS = ("tests/unit/podconf/test_resolvconf.py", "tests/unit/test_config_readers.py")

MUTATIONS: tuple[Mutation, ...] = ()
