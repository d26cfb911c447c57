"""Mutations of nodedns/app/sections.py (the limits, the forward cache, --hosts, --filter-aaaa, the kube-dns
ClusterIP check in /status)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_cache_bytes.py", "tests/e2e/test_hosts.py", "tests/e2e/test_operators.py",
         "tests/e2e/test_kube_dns_ip.py",
         "tests/unit/app/test_sections.py")

MUTATIONS = (
    Mutation(
        "cache-report-without-the-too-large",
        "nodedns/app/sections.py",
        '            "too_large": counts["too_large"],',
        '            "too_large": 0,',
        ("tests/e2e/test_cache_bytes.py::test_the_agent_keeps_its_forward_cache_within_the_budget_and_reports_it",),
        "/status and /metrics never count an answer too large for the cache's byte budget",
    ),
    Mutation(
        "hosts-report-without-the-answers",
        "nodedns/app/sections.py",
        '"answers": self.resolver.stats["hosts"]}',
        '"answers": 0}',
        ("tests/e2e/test_hosts.py::test_status_and_metrics_count_the_entries_and_the_answers",),
        "/status and /metrics never count an answer made from --hosts",
    ),
    Mutation(
        "filter-report-without-the-filtered",
        "nodedns/app/sections.py",
        "                filtered += sum(counts[slot]",
        "                filtered += 0 * sum(counts[slot]",
        ("tests/e2e/test_operators.py::test_forwarded_aaaa_questions_get_nodata_with_an_soa_and_the_upstream_is_never_"
         "asked",),
        "--filter-aaaa's answers are never counted in /status (the \"filter_aaaa\" section)",
    ),
    Mutation(
        "kube-dns-check-never-finds-a-wrong-ip",
        "nodedns/app/sections.py",
        "        wrong = [ip for ip in self.expected if ip not in svc.cluster_ips]\n",
        "        wrong: list[str] = []\n",
        ("tests/e2e/test_kube_dns_ip.py::test_a_local_ip_that_is_not_the_kube_dns_cluster_ip_is_warned_at_start_and_on_"
         "readyz",),
        "a local IP that is not the kube-dns Service's ClusterIP goes unsaid: Pods asking the real ClusterIP never "
        "reach the agent, and nothing tells why",
    ),
    Mutation(
        "host-resolv-conf-shown-by-a-worker",
        "nodedns/app/sections.py",
        "    if agent.host_file is not None and agent.mode.watches_host_file:",
        "    if agent.host_file is not None:",
        ("tests/unit/app/test_sections.py::test_the_node_s_resolv_conf_is_shown_only_by_a_process_that_watches_it",),
        "a --workers worker shows a host_resolv_conf section of a file it never reads",
        found="yes",
    ),
    Mutation(
        "dnstap-hidden-without-upstreams",
        "nodedns/app/sections.py",
        "    if agent.dnstap is not None:",
        "    if agent.dnstap is not None and agent.forwarder is not None:",
        ("tests/unit/app/test_sections.py::test_dnstap_is_shown_without_upstreams_too",),
        "with `upstream: none`, /status and /metrics never say how --dnstap's logging goes",
        found="yes",
    ),
)
