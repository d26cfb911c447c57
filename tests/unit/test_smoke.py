"""The example cluster answers over UDP and TCP."""

from tests.support.helpers import RunningAgent, rrset_values


def test_example_cluster_answers_a_clusterip_service_over_udp(example_agent: RunningAgent) -> None:
    r = example_agent.query("web.default.svc.cluster.local", "A")
    assert rrset_values(r) == ["10.96.12.34"]


def test_example_cluster_answers_over_tcp(example_agent: RunningAgent) -> None:
    r = example_agent.query("web.default.svc.cluster.local", "AAAA", tcp=True)
    assert rrset_values(r) == ["fd00:10:96::1234"]
