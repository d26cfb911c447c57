"""metrics.py: label slots, histograms, sampling and the Collector's CoreDNS-compatible output (pure)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import dns.flags
import dns.message
import dns.rcode
import dns.rrset
import pytest
from prometheus_client.parser import text_string_to_metric_families

from nodedns.metrics.counters import TIME_BUCKETS, ClusterCacheStats, Histogram, ListenerStats, Sampler, Scrape
from nodedns.metrics.registry import registry, render
from nodedns.metrics.slots import UNCLASSIFIED, SlotLabels, Slots


def _slots() -> Slots:
    return Slots(("cluster.local", "in-addr.arpa", "ip6.arpa", "corp.example"),
                 authoritative=("cluster.local", "in-addr.arpa", "ip6.arpa"), stub=("corp.example",))


def _response(name: str, rdtype: str, *, rcode: int = 0, aa: bool = False, answers: int = 0,
              edns: bool = False, do: bool = False) -> bytes:
    q = dns.message.make_query(name, rdtype, use_edns=0 if edns else None, want_dnssec=do)
    r = dns.message.make_response(q)
    r.set_rcode(rcode)
    if do:
        r.use_edns(0, dns.flags.DO, 1232)
    if aa:
        r.flags |= dns.flags.AA
    for i in range(answers):
        r.answer.append(dns.rrset.from_text(name + ".", 5, "IN", "A", f"10.0.0.{i + 1}"))
    return r.to_wire()


CLASSIFY = [
    ("cluster A answer", _response("web.default.svc.cluster.local", "A", aa=True, answers=1),
     SlotLabels("cluster.local.", "A", "NOERROR", "kubernetes", False, False)),
    ("cluster NXDOMAIN is a denial", _response("x.default.svc.Cluster.Local", "AAAA", rcode=3, aa=True),
     SlotLabels("cluster.local.", "AAAA", "NXDOMAIN", "kubernetes", False, True)),
    ("NODATA is a denial", _response("default.svc.cluster.local", "A", aa=True),
     SlotLabels("cluster.local.", "A", "NOERROR", "kubernetes", False, True)),
    ("SERVFAIL before sync is the index's", _response("a.default.svc.cluster.local", "SRV", rcode=2),
     SlotLabels("cluster.local.", "SRV", "SERVFAIL", "kubernetes", False, False)),
    ("refused outside our zones is the server's", _response("example.com", "A", rcode=5),
     SlotLabels(".", "A", "REFUSED", "", False, False)),
    ("forwarded answer", _response("example.com", "A", answers=2),
     SlotLabels(".", "A", "NOERROR", "forward", False, False)),
    ("stub domain answer", _response("db.corp.example", "A", answers=1),
     SlotLabels("corp.example.", "A", "NOERROR", "forward", False, False)),
    ("PTR in the reverse zone", _response("1.0.96.10.in-addr.arpa", "PTR", aa=True, answers=0),
     SlotLabels("in-addr.arpa.", "PTR", "NOERROR", "kubernetes", False, True)),
    ("DO bit from the OPT record", _response("web.default.svc.cluster.local", "A", aa=True, answers=1, edns=True,
                                             do=True),
     SlotLabels("cluster.local.", "A", "NOERROR", "kubernetes", True, False)),
    ("unmonitored type is other", _response("web.default.svc.cluster.local", "NAPTR", aa=True),
     SlotLabels("cluster.local.", "other", "NOERROR", "kubernetes", False, True)),
    ("HTTPS is monitored", _response("example.com", "HTTPS", answers=0),
     SlotLabels(".", "HTTPS", "NOERROR", "forward", False, True)),
    ("header-only FORMERR", b"\x12\x34\x80\x01" + b"\x00" * 8,
     SlotLabels(".", "other", "FORMERR", "", False, False)),
]


@pytest.mark.parametrize(("response", "expected"), [c[1:] for c in CLASSIFY], ids=[c[0] for c in CLASSIFY])
def test_classify_gives_coredns_labels(response: bytes, expected: SlotLabels) -> None:
    slots = _slots()
    assert slots.labels[slots.classify(response)] == expected


def test_badvers_extended_rcode_is_read_from_the_opt_record() -> None:
    r = bytearray(_response("example.com", "A", edns=True))
    r[-6] = 1  # extended rcode 1 << 4 = 16 with header rcode 0
    slots = _slots()
    assert slots.labels[slots.classify(bytes(r))].rcode == "BADVERS"


@pytest.mark.parametrize("garbage", [b"", b"\x00" * 5, b"\x00\x00\x81\x80\x00\x01\x00\x00\x00\x00\x00\x00\x05ab"],
                         ids=["empty", "short", "truncated question"])
def test_unreadable_responses_are_unclassified_never_an_error(garbage: bytes) -> None:
    assert _slots().classify(garbage) == UNCLASSIFIED


def test_stamp_writes_the_slot_into_the_first_byte_only() -> None:
    slots = _slots()
    wire = _response("web.default.svc.cluster.local", "A", aa=True, answers=1)
    stamped = slots.stamp(wire)
    assert stamped[1:] == wire[1:]
    assert slots.labels[stamped[0]].type == "A"


def test_slots_are_reused_and_overflow_into_slot_zero() -> None:
    slots = Slots()
    a = slots.slot(SlotLabels(".", "A", "NOERROR", "", False, False))
    assert slots.slot(SlotLabels(".", "A", "NOERROR", "", False, False)) == a
    for i in range(300):
        slots.slot(SlotLabels(".", f"T{i}", "NOERROR", "", False, False))
    assert len(slots.labels) == 256
    assert slots.overflow == 300 - 254
    assert slots.slot(SlotLabels(".", "T299", "NOERROR", "", False, False)) == UNCLASSIFIED


def test_time_buckets_are_coredns_exponential_buckets() -> None:
    assert TIME_BUCKETS[0] == 0.00025
    assert len(TIME_BUCKETS) == 16
    assert TIME_BUCKETS[-1] == pytest.approx(8.192)


@pytest.mark.parametrize(("seconds", "bucket"), [(0.0001, 0), (0.00025, 0), (0.0003, 1), (8.192, 15), (9.0, 16)],
                         ids=["below first", "on the bound", "next", "last bound", "+Inf"])
def test_histogram_puts_observations_in_the_le_bucket(seconds: float, bucket: int) -> None:
    h = Histogram()
    h.observe(seconds)
    assert h.counts[bucket] == 1
    assert h.count == 1
    assert h.cumulative()[-1] == ("+Inf", 1.0)


@pytest.mark.parametrize("rate", [0.01, 0.1, 0.5], ids=["1%", "10%", "50%"])
def test_sampler_samples_the_configured_share(rate: float) -> None:
    s = Sampler(rate, rng=random.Random(7).random)
    n, at, sampled = 0, s.first(), 0
    for n in range(1, 200_001):
        if n >= at:
            sampled += 1
            at = s.next(n)
    assert sampled / n == pytest.approx(rate, rel=0.05)


@pytest.mark.parametrize(("rate", "expected"), [(0.0, Sampler.NEVER), (1.0, 1)], ids=["off", "every query"])
def test_sampler_edges(rate: float, expected: int) -> None:
    assert Sampler(rate).gap() == expected


# ----------------------------------------------------------------------------------------------
# The Collector


def _scrape(sections: Mapping[str, Mapping[str, Any]] | None = None) -> Scrape:
    slots = _slots()
    ls = ListenerStats(ListenerStats.label("127.0.0.1", 53), "1")
    v6 = ListenerStats(ListenerStats.label("::1", 53), "2")
    ok = slots.classify(_response("web.default.svc.cluster.local", "A", aa=True, answers=1))
    nx = slots.classify(_response("x.default.svc.cluster.local", "A", rcode=3, aa=True))
    ls.udp_hit[ok] = 7
    ls.udp[ok] = 1
    ls.tcp[nx] = 2
    ls.udp[slots.dropped()] = 3
    ls.observe("cluster.local.", 0.0004)
    ls.tcp_open, ls.tcp_accepted, ls.tcp_refused = 1, 4, 2
    v6.udp[ok] = 5
    return Scrape(
        version="9.9.9", slots=slots, listeners=[ls, v6], alive=True, ready=False,
        index={"synced": True, "generation": 12, "counts": {"services": 3, "pods": 4}, "skipped": 1,
               "seconds_since_change": 2.5},
        cluster_cache=ClusterCacheStats("cluster.local.", 1, 2, 8, 2, 3, 0, 1),
        panics=1, errors={"DNS listener error": 4}, sections=sections or {},
    )


def _samples(scrape: Scrape) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = render(registry(lambda: scrape, process=False)).decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def _get(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def test_requests_total_has_coredns_labels_and_sums_hit_and_slow_path() -> None:
    s = _samples(_scrape())
    base = {"server": "dns://127.0.0.1:53", "zone": "cluster.local.", "view": "", "family": "1", "type": "A"}
    assert _get(s, "coredns_dns_requests_total", proto="udp", **base) == 8
    assert _get(s, "coredns_dns_requests_total", proto="tcp", **base) == 2
    assert _get(s, "coredns_dns_requests_total", server="dns://[::1]:53", zone="cluster.local.", view="",
                proto="udp", family="2", type="A") == 5
    assert _get(s, "coredns_dns_requests_total", server="dns://127.0.0.1:53", zone="dropped", view="",
                proto="udp", family="1", type="other") == 3


def test_responses_total_counts_by_rcode_and_plugin_but_not_dropped_queries() -> None:
    s = _samples(_scrape())
    lab = {"server": "dns://127.0.0.1:53", "zone": "cluster.local.", "view": ""}
    assert _get(s, "coredns_dns_responses_total", rcode="NOERROR", plugin="kubernetes", **lab) == 8
    assert _get(s, "coredns_dns_responses_total", rcode="NXDOMAIN", plugin="kubernetes", **lab) == 2
    assert not [k for k in s if k[0] == "coredns_dns_responses_total" and ("zone", "dropped") in k[1]]


def test_duration_histogram_uses_coredns_labels_and_buckets() -> None:
    s = _samples(_scrape())
    lab = {"server": "dns://127.0.0.1:53", "zone": "cluster.local.", "view": ""}
    assert _get(s, "coredns_dns_request_duration_seconds_bucket", le="0.00025", **lab) == 0
    assert _get(s, "coredns_dns_request_duration_seconds_bucket", le="0.0005", **lab) == 1
    assert _get(s, "coredns_dns_request_duration_seconds_count", **lab) == 1


def test_cluster_answers_show_as_a_coredns_cache() -> None:
    s = _samples(_scrape())
    lab = {"server": "dns://127.0.0.1:53", "zones": "cluster.local.", "view": ""}
    assert _get(s, "coredns_cache_entries", type="denial", **lab) == 2
    assert _get(s, "coredns_cache_hits_total", type="success", **lab) == 8
    assert _get(s, "coredns_cache_misses_total", **lab) == 3
    assert _get(s, "coredns_cache_requests_total", **lab) == 13


def test_process_and_nodedns_gauges() -> None:
    s = _samples(_scrape())
    assert _get(s, "coredns_build_info", version="9.9.9", revision="", goversion=next(
        dict(k[1])["goversion"] for k in s if k[0] == "coredns_build_info")) == 1
    assert _get(s, "coredns_panics_total") == 1
    assert _get(s, "nodedns_ready") == 0
    assert _get(s, "nodedns_index_objects", kind="pods") == 4
    assert _get(s, "nodedns_index_generation") == 12
    assert _get(s, "nodedns_tcp_refused_total", server="dns://127.0.0.1:53", reason="max_connections") == 2
    assert _get(s, "nodedns_hit_path_answers_total", server="dns://127.0.0.1:53") == 7
    assert _get(s, "nodedns_errors_total", kind="DNS listener error") == 4


PROVIDER_METRICS = [
    ("sync", {"stale_seconds": 12.5,
              "resources": {"services": {"resource_version": "17", "synced": True, "connected": False,
                                         "seconds_since_event": 3.5, "watch_restarts": 2, "relists": 1,
                                         "events": 40, "errors": 3}}},
     [("nodedns_sync_stale_seconds", {}, 12.5),
      ("nodedns_sync_seconds_since_last_event", {"resource": "services"}, 3.5),
      ("nodedns_watch_restarts_total", {"resource": "services"}, 2),
      ("nodedns_relists_total", {"resource": "services"}, 1),
      ("nodedns_watch_events_total", {"resource": "services"}, 40),
      ("nodedns_watch_errors_total", {"resource": "services"}, 3),
      ("nodedns_watch_connected", {"resource": "services"}, 0),
      ("nodedns_sync_synced", {"resource": "services"}, 1)]),
    ("cache", {"caches": [{"zones": ".", "entries": {"success": 10, "denial": 2}, "hits": {"success": 5},
                           "misses": 4, "prefetch": 3, "served_stale": 1}]},
     [("coredns_cache_entries", {"server": "dns://127.0.0.1:53", "type": "success", "zones": ".", "view": ""}, 10),
      ("coredns_cache_prefetch_total", {"server": "dns://127.0.0.1:53", "zones": ".", "view": ""}, 3),
      ("coredns_cache_served_stale_total", {"server": "dns://127.0.0.1:53", "zones": ".", "view": ""}, 1)]),
    ("upstream", {"upstreams": [{"to": "10.0.0.10:53", "healthy": False, "healthcheck_failures": 6,
                                 "conn_cache": {"udp": {"hits": 9, "misses": 1}}}],
                  "max_concurrent_rejects": 2, "healthcheck_broken": 1},
     [("nodedns_upstream_healthy", {"to": "10.0.0.10:53", "zone": "."}, 0),
      ("coredns_proxy_healthcheck_failures_total", {"proxy_name": "forward", "to": "10.0.0.10:53"}, 6),
      ("coredns_proxy_conn_cache_hits_total", {"proxy_name": "forward", "to": "10.0.0.10:53", "proto": "udp"}, 9),
      ("coredns_forward_max_concurrent_rejects_total", {}, 2),
      ("coredns_forward_healthcheck_broken_total", {}, 1)]),
    # two --workers processes' rows of one zone (one sees it down): one series per zone, its worst state
    ("upstream", {"zones": [{"zone": "corp.example", "state": "up", "inflight": 3, "max_concurrent": 100, "busy": 1,
                             "failfast": 0},
                            {"zone": "corp.example", "state": "down", "inflight": 0, "max_concurrent": 100,
                             "busy": 0, "failfast": 7},
                            {"zone": ".", "state": "degraded", "inflight": 2, "max_concurrent": 1000, "busy": 0,
                             "failfast": 0}]},
     [("nodedns_zone_up", {"zone": "corp.example"}, 0),
      ("nodedns_zone_up", {"zone": "."}, 1),
      ("nodedns_zone_state", {"zone": "corp.example", "state": "down"}, 1),
      ("nodedns_zone_state", {"zone": "corp.example", "state": "up"}, 0),
      ("nodedns_zone_state", {"zone": ".", "state": "degraded"}, 1),
      ("nodedns_zone_inflight", {"zone": "corp.example"}, 3),
      ("nodedns_zone_max_concurrent", {"zone": "corp.example"}, 200),
      ("nodedns_zone_max_concurrent_rejects_total", {"zone": "corp.example"}, 1),
      ("nodedns_zone_failfast_total", {"zone": "corp.example"}, 7)]),
    ("dnstap", {"connected": False, "frames": 12, "dropped": 5, "queued": 3},
     [("nodedns_dnstap_frames_total", {}, 12), ("nodedns_dnstap_dropped_total", {}, 5),
      ("nodedns_dnstap_connected", {}, 0), ("nodedns_dnstap_queued_frames", {}, 3)]),
    ("node", {"setup_errors": {"iptables": 3, "interface_add": 1}, "interface": {"name": "nodelocaldns", "ok": True},
              "rules_installed": False, "added_back": 2, "reconciles": 9},
     [("nodedns_setup_errors_total", {"errortype": "iptables"}, 3),
      ("nodedns_interface_present", {}, 1),
      ("nodedns_rules_installed", {}, 0),
      ("nodedns_node_added_back_total", {}, 2),
      ("nodedns_node_reconciles_total", {}, 9)]),
]


@pytest.mark.parametrize(("section", "status", "expected"), PROVIDER_METRICS,
                         ids=[p[0] for p in PROVIDER_METRICS])
def test_provider_status_becomes_metrics(section: str, status: Mapping[str, Any],
                                         expected: list[tuple[str, dict[str, str], float]]) -> None:
    s = _samples(_scrape({section: status}))
    for name, labels, value in expected:
        assert _get(s, name, **labels) == value, name


def test_upstream_latency_histogram_from_a_provider() -> None:
    h = Histogram()
    h.observe(0.003)
    s = _samples(_scrape({"upstream": {"upstreams": [{"to": "1.1.1.1:53", "duration": {"NOERROR": h}}]}}))
    lab = {"proxy_name": "forward", "to": "1.1.1.1:53", "rcode": "NOERROR"}
    assert _get(s, "coredns_proxy_request_duration_seconds_count", **lab) == 1
    assert _get(s, "coredns_proxy_request_duration_seconds_bucket", le="0.004", **lab) == 1


def test_malformed_provider_values_are_skipped_not_fatal() -> None:
    s = _samples(_scrape({"sync": {"resources": {"pods": {"relists": "many", "synced": True}}},
                          "node": {"setup_errors": ["not", "a", "mapping"]}}))
    assert _get(s, "nodedns_sync_synced", resource="pods") == 1
    assert not [k for k in s if k[0] == "nodedns_relists_total"]
