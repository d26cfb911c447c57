"""Mutations of nodedns/app/upstreams.py (the forwarding at run time: the cache's clock, reloads, loop probes)."""

from mutate import Mutation

TESTS = ("tests/unit/forward/test_forward.py", "tests/unit/forward/test_zones.py", "tests/e2e/test_sighup.py",
         "tests/unit/forward/test_config_reload_model.py", "tests/e2e/test_upstream_default.py")

MUTATIONS: tuple[Mutation, ...] = ()
