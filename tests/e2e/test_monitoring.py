"""The Grafana dashboard and the Prometheus alerts in daemonset/monitoring/ ask for metrics a live agent
exports, with labels it sets: every metric and label they name is read from real scrapes of two agents
(one watching an API server with an upstream and a node side, one with --workers 2 as the DaemonSet)."""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request
from collections.abc import Iterator

import dns.exception
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from nodedns import config as cfgmod
from nodedns.app.agent import Agent
from nodedns.app.parts import IndexOwner
from nodedns.cluster import watcher
from tests.support.helpers import EXAMPLE, ROOT, free_port, nodedns_cmd, query, running_agent, subprocess_env
from tests.support.node_fakes import FakeFirewall, FakeLink, Recorder
from tests.support.upstream_double import UpstreamDouble

MONITORING = ROOT / "daemonset" / "monitoring"
DASHBOARD = MONITORING / "grafana-dashboard.json"
RULES = MONITORING / "prometheusrule.yaml"
SERVICE_MONITOR = MONITORING / "servicemonitor.yaml"
METRIC = re.compile(r"\b((?:nodedns|coredns|process)_[a-z0-9_]+)\b")
ADDED_BY_PROMETHEUS = {"instance", "job", "le"}  # the scrape's target labels; `le` of histogram buckets


def rules() -> list[dict[str, object]]:
    doc = yaml.safe_load(RULES.read_text())
    assert doc["apiVersion"] == "monitoring.coreos.com/v1" and doc["kind"] == "PrometheusRule"
    return [r for g in doc["spec"]["groups"] for r in g["rules"]]


def used() -> list[tuple[str, str, set[str]]]:
    """(where, expression, labels the text names: `by (...)`, `{label=...}`, `$labels.x`, `{{x}}` legends)."""
    out = []
    dash = json.loads(DASHBOARD.read_text())
    for p in dash["panels"]:
        for t in p["targets"]:
            labels = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", t.get("legendFormat", "")))
            out.append((f"panel {p['title']!r}", t["expr"], labels))
    out.extend((f"variable {v['name']}", v["query"], set()) for v in dash["templating"]["list"] if v["type"] == "query")
    for r in rules():
        text = json.dumps(r.get("annotations", {}))
        out.append((f"alert {r['alert']}", str(r["expr"]), set(re.findall(r"\$labels\.(\w+)", text))))
    return out


def labels_named(expr: str) -> set[str]:
    names = set()
    for group in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr):
        names.update(n.strip() for n in group.split(",") if n.strip())
    for sel in re.findall(r"\{([^}]*)\}", expr):
        names.update(re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", sel))
    return names


def scrape(url: str) -> dict[str, set[str]]:
    """Every sample name in a /metrics answer, with the label names it carries."""
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    out: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, set()).update(sample.labels)
    return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, set[str]]]:
    from nodedns.errors import NetifError
    from nodedns.node.netif import NodeNetwork
    from tests.support.apiserver import FakeApiServer, namespace, service

    class BusyFirewall(FakeFirewall):
        """Its first round meets a held xtables lock (a setup error, as node-cache counts them)."""

        tried = False

        def ensure(self) -> tuple[list[str], list[NetifError]]:
            if not self.tried:
                self.tried = True
                return [], [NetifError("iptables_lock", "another process holds the xtables lock")]
            return super().ensure()

    rec = Recorder()

    def make(config: cfgmod.Config) -> Agent:
        agent = Agent(config)
        agent.node = NodeNetwork(link=FakeLink(rec), firewall=BusyFirewall(rec),  # type: ignore[arg-type]
                                 sync_interval=0.05)
        agent.changes.add(lambda _: agent.node.poke())  # as the agent wires the node it builds itself
        assert isinstance(agent.source, IndexOwner)
        agent.source.kube_timing = watcher.Timing(watch_timeout=30, read_slack=1.0, request_timeout=5,
                                                  connect_timeout=2, backoff_initial=0.05, backoff_max=0.2)
        return agent

    names: dict[str, set[str]] = {}
    tmp = tmp_path_factory.mktemp("monitoring")
    with FakeApiServer() as api, UpstreamDouble({"example.com": {"A": ["192.0.2.1"]}}) as up:
        api.put("Namespace", namespace("default"))
        api.put("Service", service("default", "web", ["10.96.0.20"]))
        kubeconfig = api.write_kubeconfig(tmp / "kubeconfig")
        with running_agent({"kubeconfig": kubeconfig, "status-listen": "127.0.0.1:0", "upstream": up.address},
                           agent_factory=make) as a:
            a.run(a.agent.wait_synced(), timeout=10)
            api.put("Service", service("default", "late", ["10.96.0.21"]))  # a watch event after the sync
            for name in ("example.com", "example.com", "nope.example.com", "web.default.svc.cluster.local"):
                a.query(name, "A")
            deadline = time.monotonic() + 5
            wanted = ("nodedns_rules_installed", "coredns_proxy_request_duration_seconds_bucket",
                      "nodedns_setup_errors_total", "nodedns_sync_seconds_since_last_event")
            while not all(w in (s := scrape(a.status_url)) for w in wanted):
                assert time.monotonic() < deadline, sorted(s)
                time.sleep(0.05)
            for k, v in s.items():
                names.setdefault(k, set()).update(v)

    port, status = free_port(), free_port()
    proc = subprocess.Popen(nodedns_cmd("serve", "--manifests", str(EXAMPLE), "--listen", f"127.0.0.1:{port}",
                                        "--status-listen", f"127.0.0.1:{status}", "--workers", "2", "--lameduck", "0s",
                                        "--upstream", "none"),
                            env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                query("127.0.0.1", port, "web.default.svc.cluster.local", "A", timeout=1)
                s = scrape(f"http://127.0.0.1:{status}")
                if "nodedns_worker_up" in s:
                    break
            except (OSError, dns.exception.DNSException):
                pass  # not answering yet
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        for k, v in s.items():
            names.setdefault(k, set()).update(v)
    finally:
        proc.terminate()
        proc.wait(20)
    yield names


@pytest.mark.parametrize("where,expr,legend_labels", used(), ids=[w for w, _, _ in used()])
def test_every_metric_and_label_in_the_dashboard_and_alerts_is_exported(
        where: str, expr: str, legend_labels: set[str], exported: dict[str, set[str]]) -> None:
    metrics = set(METRIC.findall(expr))
    assert metrics, f"{where}: no metric in {expr!r}"
    missing = sorted(m for m in metrics if m not in exported)
    assert not missing, f"{where}: not on /metrics: {missing}"
    carried = set().union(*(exported[m] for m in metrics)) | ADDED_BY_PROMETHEUS
    unknown = sorted((labels_named(expr) | legend_labels) - carried)
    assert not unknown, f"{where}: labels no metric of {sorted(metrics)} carries: {unknown}"


def test_the_alerts_are_complete_prometheus_rules() -> None:
    seen = set()
    for r in rules():
        assert re.fullmatch(r"Nodedns[A-Z][A-Za-z]+", str(r["alert"])), r
        assert r["alert"] not in seen
        seen.add(r["alert"])
        labels = r["labels"]
        assert isinstance(labels, dict) and labels["severity"] in ("critical", "warning"), r
        annotations = r["annotations"]
        assert isinstance(annotations, dict) and annotations["summary"], r
        if "for" in r:
            assert re.fullmatch(r"\d+[smh]", str(r["for"])), r


def test_the_dashboard_is_grafana_json_with_a_node_variable() -> None:
    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] == "nodedns" and dash["panels"]
    assert [v["name"] for v in dash["templating"]["list"]] == ["datasource", "instance"]
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for p in dash["panels"]:
        assert p["datasource"]["uid"] == "${datasource}"
        for t in p["targets"]:
            assert '$instance' in t["expr"], (p["title"], t["expr"])


def test_the_monitoring_files_are_documented() -> None:
    assert (MONITORING / "README.md").exists()
    text = (MONITORING / "README.md").read_text()
    assert "grafana-dashboard.json" in text and "prometheusrule.yaml" in text and "servicemonitor.yaml" in text


def test_the_service_monitor_scrapes_the_metrics_service_of_every_agent() -> None:
    """Beside the PrometheusRule: the ServiceMonitor selects the headless Service nodedns-metrics by its labels,
    in its namespace, on its named port, at the path the agent serves /metrics on."""
    monitor = yaml.safe_load(SERVICE_MONITOR.read_text())
    rule = yaml.safe_load(RULES.read_text())
    service = yaml.safe_load((ROOT / "daemonset" / "service.yaml").read_text())
    assert (monitor["apiVersion"], monitor["kind"]) == ("monitoring.coreos.com/v1", "ServiceMonitor")
    assert monitor["apiVersion"] == rule["apiVersion"]
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"] == rule["metadata"]["namespace"]
    spec = monitor["spec"]
    assert spec["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert spec["namespaceSelector"]["matchNames"] == [service["metadata"]["namespace"]]
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    [endpoint] = spec["endpoints"]
    assert endpoint["port"] in ports and endpoint["path"] == service["metadata"]["annotations"]["prometheus.io/path"]
    assert str(ports[endpoint["port"]]) == service["metadata"]["annotations"]["prometheus.io/port"]
    assert re.fullmatch(r"\d+s", endpoint["interval"]) and re.fullmatch(r"\d+s", endpoint["scrapeTimeout"])
    assert int(endpoint["scrapeTimeout"][:-1]) < int(endpoint["interval"][:-1])
    # `instance` stays the node's IP:port (the dashboard's variable and the alerts' grouping)
    assert all(r["targetLabel"] != "instance" for r in endpoint.get("relabelings", []))
