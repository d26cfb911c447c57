"""Mutations of nodedns/app/poddns.py (the kubelet settings and the node's resolv.conf the Pods here get)."""

from mutate import Mutation

TESTS = ("tests/unit/test_config_readers.py", "tests/unit/observe/test_explain.py", "tests/e2e/test_insight_agent.py")

MUTATIONS: tuple[Mutation, ...] = ()
