"""The deployment in daemonset/: valid against the Kubernetes schemas, and the invariants the agent relies on."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import dns.exception
import kubernetes_validate
import pytest
import yaml

from nodedns import config as cfgmod
from nodedns.cli import build_parser
from nodedns.cli import guard as guard_cli
from tests.support.daemonset import DIR, K8S_VERSIONS, MANIFESTS, agent_config, all_docs, args_of, container, docs, one
from tests.support.helpers import EXAMPLE, IN_CI, ROOT, free_port, nodedns_cmd, query, rrset_values, subprocess_env
from tests.support.netns import netns, requires_netns


@pytest.mark.parametrize("version", K8S_VERSIONS, ids=lambda v: f"k8s-{v}")
@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_every_manifest_is_valid_for_kubernetes(path: Path, version: str) -> None:
    for doc in docs(path):
        kubernetes_validate.validate(doc, version, strict=True)


def test_the_kustomization_lists_every_manifest_and_the_namespace() -> None:
    k = yaml.safe_load((DIR / "kustomization.yaml").read_text())
    assert sorted(k["resources"]) == sorted(p.name for p in MANIFESTS)
    assert k["namespace"] == "kube-system"
    assert [i["name"] for i in k["images"]] == [container()["image"].split(":")[0]]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed (the offline checks still run)")
def test_kubectl_kustomize_builds_the_directory() -> None:
    r = subprocess.run(["kubectl", "kustomize", str(DIR)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    built = [d for d in yaml.safe_load_all(r.stdout) if d]
    assert sorted(d["kind"] for d in built) == sorted(d["kind"] for d in all_docs())
    for doc in built:
        kubernetes_validate.validate(doc, K8S_VERSIONS[0], strict=True)


def test_the_daemonset_runs_on_every_node_in_the_host_network() -> None:
    ds = one("DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    assert spec["hostNetwork"] is True
    assert spec["dnsPolicy"] == "Default"
    assert spec["priorityClassName"] == "system-node-critical"
    assert {"operator": "Exists"} in spec["tolerations"]  # no key, no effect: every taint
    assert ds["spec"]["updateStrategy"] == {"type": "RollingUpdate",
                                            "rollingUpdate": {"maxSurge": "10%", "maxUnavailable": 0}}
    assert ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    assert spec["serviceAccountName"] == one("ServiceAccount")["metadata"]["name"]


def test_the_container_adds_only_net_admin_and_the_port_53_capability() -> None:
    sc = container()["securityContext"]
    assert sc["capabilities"] == {"drop": ["ALL"], "add": ["NET_ADMIN", "NET_BIND_SERVICE"]}
    assert sc["allowPrivilegeEscalation"] is False
    assert sc.get("privileged", False) is False
    assert sc["readOnlyRootFilesystem"] is True
    assert (sc["runAsUser"], sc["runAsGroup"]) == (0, 0)  # non-root gets no effective capabilities


def test_every_container_runs_under_the_runtime_default_seccomp_profile() -> None:
    spec = one("DaemonSet")["spec"]["template"]["spec"]
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for c in spec["containers"] + spec.get("initContainers", []):
        # a container may repeat the pod's profile, never loosen it
        assert c.get("securityContext", {}).get("seccompProfile", {"type": "RuntimeDefault"}) == \
            {"type": "RuntimeDefault"}, c["name"]
        assert not c.get("securityContext", {}).get("privileged", False), c["name"]


def test_the_debug_routes_are_not_exposed_to_pods(tmp_path: Path) -> None:
    """The status port (any Pod reaches the node's addresses) serves probes and metrics only; the debug
    listener is on the node's loopback or a Unix socket, and no port or Service names it."""
    cfg = agent_config(tmp_path)
    assert cfg.debug_listen is not None
    if isinstance(cfg.debug_listen, str):
        assert cfg.debug_listen.startswith("unix:/run/nodedns/")  # the hostPath mount, root only
    else:
        assert cfg.debug_listen[0] in ("127.0.0.1", "::1")
        debug_port = cfg.debug_listen[1]
        assert debug_port not in {p["containerPort"] for p in container().get("ports", [])}
        assert debug_port not in {p["port"] for p in one("Service")["spec"]["ports"]}
    assert cfg.status_listen is not None and cfg.debug_listen != cfg.status_listen
    assert not cfg.no_debug  # the explainer is there for operators, on that listener


LOCAL_IP = "169.254.20.10"
CAPABILITY_CASES = [
    ("the DaemonSet's capabilities", (), ""),
    ("without NET_ADMIN the interface and rules cannot be made", ("net_admin",),
     "cannot start: node setup: listing raw PREROUTING: exit status 4: iptables v"),
    ("without NET_BIND_SERVICE port 53 cannot be bound", ("net_bind_service",),
     f"cannot start: --listen {LOCAL_IP}:53: permission denied: a port below 1024 needs the NET_BIND_SERVICE "
     "capability"),
]


@requires_netns
@pytest.mark.skipif(shutil.which("setpriv") is None and not IN_CI, reason="setpriv (util-linux) is not installed")
@pytest.mark.parametrize(("without", "failure"), [c[1:] for c in CAPABILITY_CASES],
                         ids=[c[0] for c in CAPABILITY_CASES])
def test_each_capability_the_daemonset_adds_is_needed(tmp_path: Path, without: tuple[str, ...],
                                                      failure: str) -> None:
    """The agent as the DaemonSet runs it on a node (interface, local IP, iptables rules, port 53) with
    exactly the container's capabilities and no_new_privs: ready; with one of them fewer: it fails."""
    caps = [c.lower() for c in container()["securityContext"]["capabilities"]["add"] if c.lower() not in without]
    bounding = ",".join(["-all", *(f"+{c}" for c in caps)])
    ready = tmp_path / "ready"
    with netns("caps") as ns:
        argv = ["setpriv", f"--bounding-set={bounding}", "--inh-caps=-all", "--no-new-privs", "--",
                *nodedns_cmd("serve", "--manifests", str(EXAMPLE), "--setup-interface", "nodelocaldns",
                             "--local-ip", LOCAL_IP, "--firewall", "iptables", "--status-listen",
                             f"{LOCAL_IP}:9253", "--debug-listen", "127.0.0.1:9254", "--workers", "1",
                             "--lameduck", "0s", "--lock-dir", str(tmp_path / "locks"), "--ready-file", str(ready))]
        proc = subprocess.Popen([*ns.exec_prefix, *argv], env=subprocess_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 30
            while proc.poll() is None and not ready.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            if not failure:
                assert ready.exists(), "not ready with the DaemonSet's capabilities"
                assert "nodelocaldns" in ns.run("ip", "-o", "addr", "show").stdout
                proc.terminate()
            out = proc.communicate(timeout=20)[0]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
    if failure:
        assert proc.returncode == 1 and failure in out, out
        assert "permission denied" in out.lower(), out
        assert "NET_ADMIN" in out.splitlines()[-1] if "net_admin" in without else "NET_BIND_SERVICE" in out, out
        # the log agrees with /readyz (never ready) and with docs/hardening.md (it cannot start); a refused
        # iptables is not a busy lock
        assert " ready: " not in out and "xtables lock is busy" not in out, out
    else:
        assert proc.returncode == 0, out


def test_the_daemonset_runs_on_linux_nodes_only() -> None:
    """It tolerates every taint, so without a selector it would land on Windows nodes too."""
    spec = one("DaemonSet")["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}


def test_the_kube_dns_configmap_is_mounted_optionally_where_the_config_reads_it(tmp_path: Path) -> None:
    """As node-local-dns mounts it (-kubednscm /etc/kube-dns): the cluster's kube-dns ConfigMap, optional."""
    spec = one("DaemonSet")["spec"]["template"]["spec"]
    volume = next(v for v in spec["volumes"] if v.get("configMap", {}).get("name") == "kube-dns")
    assert volume["configMap"]["optional"] is True  # a cluster without one still starts the agent
    mount = next(m for m in container()["volumeMounts"] if m["name"] == volume["name"])
    assert mount["readOnly"] is True
    assert agent_config(tmp_path).kube_dns_config_dir == mount["mountPath"] == "/etc/kube-dns"
    assert one("DaemonSet")["metadata"]["namespace"] == "kube-system"  # where the kube-dns ConfigMap lives


def test_node_name_comes_from_the_downward_api() -> None:
    env = {e["name"]: e for e in container()["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}


def test_the_xtables_lock_of_the_node_is_shared() -> None:
    spec = one("DaemonSet")["spec"]["template"]["spec"]
    vol = next(v for v in spec["volumes"] if "hostPath" in v)
    assert vol["hostPath"] == {"path": "/run/xtables.lock", "type": "FileOrCreate"}
    mount = next(m for m in container()["volumeMounts"] if m["name"] == vol["name"])
    assert mount["mountPath"] == "/run/xtables.lock"


def test_args_and_configmap_are_real_flags_and_match_the_probes_and_ports(tmp_path: Path) -> None:
    cfg = agent_config(tmp_path)
    assert cfg.setup_interface == "nodelocaldns" and cfg.firewall == "iptables"
    assert cfg.node_name == "node-a"
    assert cfg.status_listen is not None
    status_port = cfg.status_listen[1]
    c = container()
    get = c["livenessProbe"]["httpGet"]
    assert (get["path"], get["port"]) == ("/healthz", status_port)
    assert get["host"] in cfg.local_ip  # probed where pods reach us; needs the status listener on it
    assert cfg.status_listen[0] in ("0.0.0.0", get["host"])
    assert cfg.ready_file is not None and cfg.ready_file in c["readinessProbe"]["exec"]["command"][-1]
    assert "ports" not in c  # with hostNetwork they would be hostPorts: the surge pod could not be scheduled
    assert {port for _, port in cfg.listen_addresses} == {53}
    mount = next(m for m in c["volumeMounts"] if m["name"] == "config")
    assert c["args"][c["args"].index("--config") + 1].startswith(mount["mountPath"] + "/")


def test_the_configmap_ships_the_node_cache_arrangement(tmp_path: Path) -> None:
    """The link-local address and the kube-dns ClusterIP, both owned: Pods keep the ClusterIP as nameserver."""
    cfg = agent_config(tmp_path)
    link_local, cluster_ip = cfg.local_ip
    assert link_local == "169.254.20.10" and cluster_ip == "10.96.0.10"  # kubeadm's default kube-dns ClusterIP
    assert "local-ip" not in yaml.safe_load(one("ConfigMap")["data"]["config.yaml"])  # one place: the key


def test_the_guard_container_guards_exactly_what_the_agent_sets_up(tmp_path: Path) -> None:
    """The guard reads the interface, the firewall and the zone from the agent's own config file, the local IPs
    from the same ConfigMap key: nothing of it is written twice."""
    cfg = agent_config(tmp_path)
    raw = args_of(container("guard"))
    assert "--interface" not in raw and "--firewall" not in raw  # from the ConfigMap, not repeated by hand
    mount = next(m for m in container("guard")["volumeMounts"] if m["name"] == "config")
    agent_mount = next(m for m in container()["volumeMounts"] if m["name"] == "config")
    assert mount == agent_mount
    assert raw[raw.index("--config") + 1] == container()["args"][container()["args"].index("--config") + 1]
    args = build_parser().parse_args([a.replace("/etc/nodedns/config.yaml", str(tmp_path / "config.yaml"))
                                      for a in raw])  # the real CLI: unknown flags exit here
    assert args.command == "guard"
    s = guard_cli.settings(args)
    assert (s.interface, s.local_ips, s.firewall) == (cfg.setup_interface, list(cfg.local_ip), cfg.firewall)
    assert s.probe_name == f"dns-version.{cfg.cluster_domain}"
    assert container("guard")["image"] == container()["image"]


def test_the_guard_follows_a_changed_configmap(tmp_path: Path) -> None:
    """Another interface, firewall and zone in the agent's file: the guard guards those."""
    agent_config(tmp_path)  # writes the ConfigMap's config.yaml there
    path = tmp_path / "config.yaml"
    text = path.read_text()
    for old, new in (("setup-interface: nodelocaldns", "setup-interface: dns0"), ("firewall: iptables",
                                                                                  "firewall: nftables"),
                     ("cluster-domain: cluster.local", "cluster-domain: corp.example")):
        assert old in text
        text = text.replace(old, new)
    path.write_text(text)
    args = build_parser().parse_args(["guard", "--config", str(path), "--local-ip", "169.254.20.10"])
    s = guard_cli.settings(args)
    assert (s.interface, s.firewall, s.probe_name) == ("dns0", "nftables", "dns-version.corp.example")
    flags = build_parser().parse_args(["guard", "--config", str(path), "--local-ip", "169.254.20.10",
                                       "--interface", "dns1", "--firewall", "none"])
    assert guard_cli.settings(flags)[1:3] == ("dns1", "none")  # flags win


def test_the_guard_container_is_small_and_least_privileged() -> None:
    g = container("guard")
    sc = g["securityContext"]
    assert sc["capabilities"] == {"drop": ["ALL"], "add": ["NET_ADMIN"]}
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert g["resources"]["limits"]["memory"] == "64Mi"  # its own limit (tests/e2e/test_guard.py measures the peak)
    assert "cpu" not in g["resources"]["limits"]  # throttling the guard would delay the fallback
    # the agent's config, read-only, and kube-proxy's lock
    assert [(m["mountPath"], m.get("readOnly", False)) for m in g["volumeMounts"]] == [("/etc/nodedns", True),
                                                                                       ("/run/xtables.lock", False)]
    assert "ports" not in g and "readinessProbe" not in g  # the Pod's readiness is the agent's


def test_the_metrics_service_is_headless_and_selects_the_agents(tmp_path: Path) -> None:
    svc = one("Service")
    cfg = agent_config(tmp_path)
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"].items() <= one("DaemonSet")["spec"]["template"]["metadata"]["labels"].items()
    assert cfg.status_listen is not None
    assert [(p["port"], p["targetPort"]) for p in svc["spec"]["ports"]] == [(9253, cfg.status_listen[1])]


def grants(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
            for v in rule["verbs"]}


def test_rbac_grants_exactly_the_reads_the_sync_needs() -> None:
    expected = {("", r, v) for r in ("services", "namespaces", "pods") for v in ("list", "watch")}
    expected |= {("discovery.k8s.io", "endpointslices", v) for v in ("list", "watch")}
    expected |= {("", "nodes", v) for v in ("get", "list", "watch")}  # its own Node (issue 8)
    expected |= {("nodedns.io", r, v) for r in ("dnspolicies", "clusterdnspolicies") for v in ("list", "watch")}
    # the only write: the policies' status subresource (their conditions), never their spec
    expected |= {("nodedns.io", f"{r}/status", "patch") for r in ("dnspolicies", "clusterdnspolicies")}
    assert grants(one("ClusterRole")) == expected
    # the ConfigMaps of RPZ feeds: read in one namespace by a Role, never cluster-wide
    assert grants(one("Role")) == {("", "configmaps", "list"), ("", "configmaps", "watch")}
    role_binding = one("RoleBinding")
    assert role_binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                       "name": one("Role")["metadata"]["name"]}
    binding = one("ClusterRoleBinding")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": one("ClusterRole")["metadata"]["name"]}
    sa = one("ServiceAccount")["metadata"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["name"], "namespace": sa["namespace"]}]
    assert role_binding["subjects"] == binding["subjects"]


def test_the_memory_request_covers_the_measured_rss_on_the_example_cluster(tmp_path: Path) -> None:
    """The supervisor, the zygote and the ConfigMap's number of workers, each at its peak (VmHWM), summed
    (RSS: shared pages counted in every process, more than the pod's memory cgroup is charged)."""
    request = container()["resources"]["requests"]["memory"]
    m = re.fullmatch(r"(\d+)Mi", request)
    assert m, request
    workers = agent_config(tmp_path).workers
    assert workers >= 1
    port = free_port()
    proc = subprocess.Popen(nodedns_cmd("serve", "--manifests", str(EXAMPLE), "--listen", f"127.0.0.1:{port}",
                                        "--lameduck", "0s", "--status-listen", "none", "--workers", str(workers),
                                        "--upstream", "none"),
                            env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if rrset_values(query("127.0.0.1", port, "web.default.svc.cluster.local", timeout=0.3)):
                    break
            except (dns.exception.Timeout, ConnectionRefusedError):
                assert proc.poll() is None and time.monotonic() < deadline
        for _ in range(100):  # from fresh sockets: spread over the workers
            query("127.0.0.1", port, "web.default.svc.cluster.local", timeout=1)
        pids = [proc.pid]
        for pid in pids:  # the whole tree: the supervisor, the zygote its workers are forked from, the workers
            pids.extend(map(int, Path(f"/proc/{pid}/task/{pid}/children").read_text().split()))
        assert len(pids) == 1 + (1 + workers if workers > 1 else 0), pids
        peak_kib = sum(int(re.search(r"VmHWM:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())  # type:
        # ignore[union-attr]
                           .group(1)) for pid in pids)
    finally:
        proc.terminate()
        proc.wait(10)
    assert peak_kib / 1024 < int(m.group(1)), f"peak RSS {peak_kib // 1024} MiB over {len(pids)} processes"


def test_the_containerfile_builds_a_root_image_with_the_firewall_tools() -> None:
    """What the file says; tests/e2e/test_image.py builds it and runs it."""
    text = (DIR / "Containerfile").read_text()
    # the base is an argument whose default is named by digest, used by the build and the root stage;
    # the image is that root, slimmed, as one layer (no package manager: files deleted in a later
    # layer would still be pulled)
    assert re.search(r"^ARG BASE=docker\.io/library/python:3\.11-slim@sha256:[0-9a-f]{64}$", text, re.M)
    assert re.findall(r"^FROM (\S+)", text, re.M) == ["${BASE}", "${BASE}", "scratch"]
    assert re.search(r"^COPY --from=root / /$", text, re.M)
    assert "/tmp/slim-root.py" in text and "apt-get" not in text.split("FROM scratch", 1)[1]
    assert re.search(r"apt-get install .*\biproute2\b.*\biptables\b.*\bnftables\b", text)
    # dependencies only from the hash-locked file; nodedns itself from the source, nothing else fetched
    assert "--require-hashes" in text and "-r /src/daemonset/requirements.txt" in text
    assert "--no-deps --no-build-isolation --no-index /src" in " ".join(text.replace("\\\n", " ").split())
    # the C extensions are built (the image fails to build otherwise); the compiler stays in the build stage
    assert "gcc libc6-dev" in text and 'python -c "import nodedns.serve._hitpath, nodedns.cluster._slim"' in text
    assert re.search(r"^COPY --from=build /opt/nodedns /opt/nodedns$", text, re.M)
    assert re.search(r'^ENTRYPOINT \["nodedns"\]$', text, re.M)
    assert re.search(r"^USER 0$", text, re.M)
    for copied in re.findall(r"^COPY (?!--from)(.+) \S+$", text, re.M):
        for src in copied.split():
            assert (ROOT / src).exists(), src


def test_the_locked_requirements_pin_every_dependency_with_hashes() -> None:
    """daemonset/requirements.txt (scripts/lock-requirements) covers pyproject's dependencies and the build's."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    text = (DIR / "requirements.txt").read_text()
    blocks = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+) \\\n((?:\s+--hash=sha256:[0-9a-f]{64}(?: \\)?\n)+)", text, re.M)
    pins = {canonicalize_name(name): version for name, version, _ in blocks}
    assert len(pins) == len(re.findall(r"^[A-Za-z0-9_.-]+==", text, re.M)), "a pin without hashes"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wanted = [Requirement(r) for r in project["project"]["dependencies"] + project["build-system"]["requires"]]
    for req in wanted:
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not locked: run scripts/lock-requirements"
        assert req.specifier.contains(pins[name], prereleases=True), f"{req}: locked {pins[name]}"


def test_memory_has_a_limit_above_the_large_cluster_figure_and_cpu_none() -> None:
    """A runaway is stopped; a 5,000-node cluster with the ConfigMap's workers (~145 MB measured by
    scripts/bench-sync, a relist peak under 1.5x) is not; CPU is never throttled."""
    resources = container()["resources"]
    request = int(re.fullmatch(r"(\d+)Mi", resources["requests"]["memory"]).group(1))  # type: ignore[union-attr]
    limit = int(re.fullmatch(r"(\d+)Mi", resources["limits"]["memory"]).group(1))  # type: ignore[union-attr]
    assert limit >= 1.5 * 145 and limit >= 2 * request
    assert "cpu" not in resources["limits"]


# -- the clusterset zone: daemonset/multicluster/ (a kustomize Component: the flag and the RBAC it needs),
#    applied with the base by daemonset-multicluster/ ---------------------------------------------------------

COMPONENT = DIR / "multicluster"
OVERLAY = ROOT / "daemonset-multicluster"
OVERLAY_MANIFESTS = sorted(p for p in COMPONENT.glob("*.yaml") if p.name not in ("kustomization.yaml",
                                                                                 "daemonset-patch.yaml"))


@pytest.mark.parametrize("version", K8S_VERSIONS, ids=lambda v: f"k8s-{v}")
@pytest.mark.parametrize("path", OVERLAY_MANIFESTS, ids=lambda p: p.name)
def test_every_overlay_manifest_is_valid_for_kubernetes(path: Path, version: str) -> None:
    for doc in docs(path):
        kubernetes_validate.validate(doc, version, strict=True)


def test_the_overlay_is_the_base_plus_the_component_that_lists_its_manifests() -> None:
    overlay = yaml.safe_load((OVERLAY / "kustomization.yaml").read_text())
    assert overlay["resources"] == ["../daemonset"] and overlay["components"] == ["../daemonset/multicluster"]
    component = yaml.safe_load((COMPONENT / "kustomization.yaml").read_text())
    assert component["kind"] == "Component"
    assert sorted(component["resources"]) == sorted(p.name for p in OVERLAY_MANIFESTS)
    assert component["patches"] == [{"path": "daemonset-patch.yaml", "target": {
        "group": "apps", "version": "v1", "kind": "DaemonSet", "name": one("DaemonSet")["metadata"]["name"]}}]


def test_the_overlay_grants_only_reads_of_service_imports_to_the_agents_account() -> None:
    """The imported EndpointSlices are EndpointSlices: the base role covers them already."""
    (role,) = docs(COMPONENT / "clusterrole.yaml")
    assert grants(role) == {("multicluster.x-k8s.io", "serviceimports", v) for v in ("list", "watch")}
    assert ("discovery.k8s.io", "endpointslices", "watch") in grants(one("ClusterRole"))
    (binding,) = docs(COMPONENT / "clusterrolebinding.yaml")
    assert binding["roleRef"]["name"] == role["metadata"]["name"] != one("ClusterRole")["metadata"]["name"]
    sa = one("ServiceAccount")["metadata"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["name"], "namespace": sa["namespace"]}]


def test_the_overlay_patch_adds_a_real_flag_to_the_agents_args(tmp_path: Path) -> None:
    """Applied to the base DaemonSet as kustomize applies a JSON 6902 patch, the args parse with the real
    CLI and, with the ConfigMap, give the clusterset zone."""
    patch = yaml.safe_load((COMPONENT / "daemonset-patch.yaml").read_text())
    ds = one("DaemonSet")
    args = args_of(container())
    for op in patch:
        assert op["op"] == "add" and op["path"] == "/spec/template/spec/containers/0/args/-", op
        args.append(op["value"])
    assert ds["spec"]["template"]["spec"]["containers"][0]["args"] == container()["args"]  # base untouched
    cfg_file = tmp_path / "config.yaml"
    cfg_file.write_text(one("ConfigMap")["data"]["config.yaml"])
    ns = build_parser().parse_args([a.replace("/etc/nodedns/config.yaml", str(cfg_file)) for a in args])
    flags = {k: v for k, v in vars(ns).items() if k not in ("run", "command")}
    cfg = cfgmod.from_sources(flags, environ={"NODE_NAME": "node-a"})
    assert cfg.multicluster_zone == "clusterset.local"
    assert agent_config(tmp_path).multicluster_zone == ""  # the base stays without it


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed (the offline checks still run)")
def test_kubectl_kustomize_builds_the_overlay() -> None:
    r = subprocess.run(["kubectl", "kustomize", str(OVERLAY)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    built = [d for d in yaml.safe_load_all(r.stdout) if d]
    assert sorted(d["kind"] for d in built) == sorted([d["kind"] for d in all_docs()]
                                                      + ["ClusterRole", "ClusterRoleBinding"])
    for doc in built:
        kubernetes_validate.validate(doc, K8S_VERSIONS[0], strict=True)
    ds = next(d for d in built if d["kind"] == "DaemonSet")
    assert ds["spec"]["template"]["spec"]["containers"][0]["args"][-1] == "--multicluster-zone=clusterset.local"
