"""Tests for `nodedns resolv-conf`: exit codes, stdin, YAML and JSON, the kubelet's "" flags, warnings on
stderr, --check-host, and the atomic -o write. Most run the real command in a subprocess."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from nodedns.cli import main
from nodedns.cli.resolv_conf import write_atomic

REPO = Path(__file__).resolve().parents[2]

HOST = "nameserver 10.1.1.10\nsearch foo.com\noptions ndots:1\n"
POD_YAML = """\
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: shop
spec:
  containers:
  - name: web
    image: nginx
  dnsConfig:
    searches: [corp.example]
    options:
    - name: ndots
      value: "2"
"""
POD_JSON = json.dumps(
    {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"dnsConfig": {"searches": ["corp.example"], "options": [{"name": "ndots", "value": "2"}]}},
    }
)
EXPECTED = (
    "nameserver 10.0.0.10\n"
    "search shop.svc.cluster.local svc.cluster.local cluster.local foo.com corp.example\n"
    "options ndots:2\n"
)


def nodedns(
    *args: str, stdin: bytes | None = None, umask: int | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `python -m nodedns resolv-conf ARGS` for real (the child inherits `umask` if given)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONWARNINGS": "error"}
    old_umask = os.umask(umask) if umask is not None else None
    try:
        result = subprocess.run(
            [sys.executable, "-m", "nodedns", "resolv-conf", *args],
            input=stdin,
            capture_output=True,
            env=env,
            timeout=60,
        )
    finally:
        if old_umask is not None:
            os.umask(old_umask)
    return subprocess.CompletedProcess(
        result.args,
        result.returncode,
        result.stdout.decode("utf-8", "surrogateescape"),
        result.stderr.decode("utf-8", "surrogateescape"),
    )


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    paths = {
        "yaml": tmp_path / "pod.yaml",
        "json": tmp_path / "pod.json",
        "host": tmp_path / "resolv.conf",
    }
    paths["yaml"].write_text(POD_YAML)
    paths["json"].write_text(POD_JSON)
    paths["host"].write_text(HOST)
    return {key: str(path) for key, path in paths.items()}


def kubelet_flags(host: str, *, cluster_dns: str = "10.0.0.10") -> list[str]:
    return ["--resolv-conf", host, "--cluster-dns", cluster_dns, "--cluster-domain", "cluster.local"]


# --- rendering -----------------------------------------------------------------------------------------


def test_a_yaml_pod_is_rendered_to_stdout(files: dict[str, str]) -> None:
    result = nodedns("--pod", files["yaml"], *kubelet_flags(files["host"]))
    assert (result.returncode, result.stdout, result.stderr) == (0, EXPECTED, "")


def test_a_json_pod_is_rendered_the_same(files: dict[str, str]) -> None:
    result = nodedns("--pod", files["json"], *kubelet_flags(files["host"]))
    assert (result.returncode, result.stdout, result.stderr) == (0, EXPECTED, "")


@pytest.mark.parametrize("manifest", [POD_YAML, POD_JSON], ids=["yaml", "json"])
def test_the_pod_is_read_from_stdin_with_a_dash(files: dict[str, str], manifest: str) -> None:
    result = nodedns("--pod", "-", *kubelet_flags(files["host"]), stdin=manifest.encode())
    assert (result.returncode, result.stdout, result.stderr) == (0, EXPECTED, "")


def test_the_host_file_may_come_from_stdin_instead(files: dict[str, str]) -> None:
    result = nodedns("--pod", files["yaml"], *kubelet_flags("-"), stdin=HOST.encode())
    assert (result.returncode, result.stdout) == (0, EXPECTED)


@pytest.mark.parametrize(
    ("node_ips", "expected"),
    [
        ([], "nameserver 127.0.0.1\nsearch .\n"),
        (["--node-ips", "10.1.2.3,fd00::1"], "nameserver 127.0.0.1\nnameserver ::1\nsearch .\n"),
    ],
    ids=["no-node-ips", "dual-stack-node"],
)
def test_empty_resolv_conf_means_the_kubelet_has_no_host_file(
    tmp_path: Path, node_ips: list[str], expected: str
) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text("kind: Pod\nspec:\n  dnsPolicy: Default\n")
    result = nodedns("--pod", str(pod), *kubelet_flags(""), *node_ips)
    assert (result.returncode, result.stdout, result.stderr) == (0, expected, "")


def test_empty_cluster_dns_falls_back_to_default_and_warns_on_stderr(files: dict[str, str]) -> None:
    result = nodedns("--pod", files["yaml"], *kubelet_flags(files["host"], cluster_dns=""))
    assert result.returncode == 0
    assert result.stdout == "nameserver 10.1.1.10\nsearch foo.com corp.example\noptions ndots:2\n"
    assert result.stderr == (
        "warning: MissingClusterDNS: kubelet does not have ClusterDNS IP configured and cannot create Pod "
        'using "ClusterFirst" policy. Falling back to "Default" policy.\n'
    )


def test_each_warning_is_one_stderr_line_naming_its_kind(tmp_path: Path) -> None:
    host = tmp_path / "resolv.conf"
    host.write_text(
        "".join(f"nameserver 10.0.0.{n}\n" for n in range(1, 5)) + "search " + "a" * 254 + " ok.example\n"
    )
    pod = tmp_path / "pod.json"
    pod.write_text(json.dumps({"kind": "Pod", "spec": {"dnsPolicy": "ClusterFirst"}}))
    result = nodedns("--pod", str(pod), *kubelet_flags(str(host), cluster_dns=""))
    assert result.returncode == 0
    assert (
        result.stdout == "nameserver 10.0.0.1\nnameserver 10.0.0.2\nnameserver 10.0.0.3\nsearch ok.example\n"
    )
    lines = result.stderr.splitlines()
    assert [line.split(":")[0:2] for line in lines] == [
        ["warning", " MissingClusterDNS"],
        ["warning", " NameserverLimit"],
        ["warning", " SearchLimit"],
    ]
    assert lines[1].endswith("the applied nameserver line is: 10.0.0.1 10.0.0.2 10.0.0.3")
    assert lines[2].endswith("the applied search line is: ok.example")


def test_bytes_that_are_not_utf8_in_the_host_file_are_copied_through(tmp_path: Path) -> None:
    host = tmp_path / "resolv.conf"
    host.write_bytes(b"nameserver 1.1.1.1\nsearch caf\xe9.example\n")
    pod = tmp_path / "pod.yaml"
    pod.write_text("spec: {dnsPolicy: Default}\n")
    out = tmp_path / "out"
    result = nodedns("--pod", str(pod), *kubelet_flags(str(host)), "-o", str(out))
    assert result.returncode == 0
    assert out.read_bytes() == b"nameserver 1.1.1.1\nsearch caf\xe9.example\n"


def test_nothing_to_write_gives_an_empty_output(tmp_path: Path) -> None:
    host = tmp_path / "resolv.conf"
    host.write_text("# empty\n")
    pod = tmp_path / "pod.yaml"
    pod.write_text("spec: {dnsPolicy: Default}\n")
    result = nodedns("--pod", str(pod), *kubelet_flags(str(host)))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


# --- a Pod the API server would reject -----------------------------------------------------------------

REJECTED = [
    ("unsupported-policy", "spec:\n  dnsPolicy: Custom\n", ["spec.dnsPolicy: Unsupported value: \"Custom\""]),
    ("none-without-dns-config", "spec:\n  dnsPolicy: None\n",
     ["spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None"]),
    ("bad-second-search", "spec:\n  dnsConfig:\n    searches: [ok.example, Not_OK]\n",
     ['spec.dnsConfig.searches[1]: Invalid value: "Not_OK": a lowercase RFC 1123 subdomain']),
    ("several-errors", "spec:\n  dnsPolicy: Custom\n  dnsConfig:\n    nameservers: [dns.google]\n"
     "    options: [{name: ''}]\n",
     ['spec.dnsPolicy: Unsupported value: "Custom"',
      'spec.dnsConfig.nameservers[0]: Invalid value: "dns.google": must be a valid IP address',
      "spec.dnsConfig.options[0]: Required value: must not be empty"]),
    ("option-value-is-a-number", "spec:\n  dnsConfig:\n    options: [{name: ndots, value: 2}]\n",
     ["spec.dnsConfig.options[0].value: Invalid value: 2: must be a string"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("manifest", "fragments"), [row[1:] for row in REJECTED], ids=[row[0] for row in REJECTED]
)
def test_a_rejected_pod_exits_2_naming_each_field(
    files: dict[str, str], tmp_path: Path, manifest: str, fragments: list[str]
) -> None:
    pod = tmp_path / "bad.yaml"
    pod.write_text(manifest)
    result = nodedns("--pod", str(pod), *kubelet_flags(files["host"]))
    assert (result.returncode, result.stdout) == (2, "")
    lines = result.stderr.splitlines()
    assert lines[0] == f"nodedns resolv-conf: error: --pod {pod}: the API server would reject this Pod:"
    assert len(lines) == 1 + len(fragments)
    for line, fragment in zip(lines[1:], fragments, strict=True):
        assert line.startswith(f"nodedns resolv-conf: error: {fragment}")
    assert "Traceback" not in result.stderr


# --- unreadable or unusable input ----------------------------------------------------------------------


# Each row: id, files to create in tmp (name -> bytes), the arguments, stdin, a fragment of the message.
# "{tmp}" and "{host}" in arguments and fragments stand for the test's directory and a good host file.
FLAGS = ["--resolv-conf", "{host}", "--cluster-dns", "10.0.0.10", "--cluster-domain", "cluster.local"]
POD = {"ok.yaml": POD_YAML.encode()}
INPUT_ERRORS = [
    ("pod-file-missing", {}, ["--pod", "{tmp}/nope.yaml", *FLAGS], None,
     "--pod {tmp}/nope.yaml: cannot read: No such file or directory"),
    ("pod-is-a-directory", {}, ["--pod", "{tmp}", *FLAGS], None, "cannot read: Is a directory"),
    ("pod-not-yaml", {"bad.yaml": b"spec: [unclosed\n"}, ["--pod", "{tmp}/bad.yaml", *FLAGS], None,
     "--pod {tmp}/bad.yaml: not YAML or JSON: "),
    ("pod-not-utf8", {"bin.yaml": b"\xff\xfe\x00garbage"}, ["--pod", "{tmp}/bin.yaml", *FLAGS], None,
     "not UTF-8 text"),
    ("pod-empty", {"empty.yaml": b"---\n"}, ["--pod", "{tmp}/empty.yaml", *FLAGS], None,
     "no Pod in it (empty)"),
    ("pod-two-documents", {"two.yaml": POD_YAML.encode() + b"---\n" + POD_YAML.encode()},
     ["--pod", "{tmp}/two.yaml", *FLAGS], None, "expected one Pod, found 2 documents"),
    ("pod-is-a-service", {"svc.yaml": b"apiVersion: v1\nkind: Service\nspec: {}\n"},
     ["--pod", "{tmp}/svc.yaml", *FLAGS], None, 'expected kind Pod, got "Service"'),
    ("pod-is-a-list", {"list.json": b"[]"}, ["--pod", "{tmp}/list.json", *FLAGS], None,
     "expected a Pod object, got a list"),
    ("pod-is-a-scalar", {"scalar.yaml": b"hello\n"}, ["--pod", "{tmp}/scalar.yaml", *FLAGS], None,
     "expected a Pod object, got a string"),
    ("pod-from-endless-stdin", {}, ["--pod", "-", *FLAGS], b"#" * ((3 << 20) + 10),
     "--pod <stdin>: larger than the 3 MiB the API server accepts"),
    ("host-file-missing", POD, ["--pod", "{tmp}/ok.yaml", *kubelet_flags("{tmp}/none.conf")], None,
     "--resolv-conf {tmp}/none.conf: cannot read"),
    ("host-file-bare-nameserver", {**POD, "h.conf": b"nameserver\n"},
     ["--pod", "{tmp}/ok.yaml", *kubelet_flags("{tmp}/h.conf")], None, "nameserver list is empty"),
    ("host-file-over-10-mib", {**POD, "big.conf": b"#" * ((10 << 20) + 1)},
     ["--pod", "{tmp}/ok.yaml", *kubelet_flags("{tmp}/big.conf")], None,
     "larger than the 10 MiB the kubelet reads"),
    ("bad-cluster-dns", POD, ["--pod", "{tmp}/ok.yaml", *kubelet_flags("{host}", cluster_dns="kube-dns")],
     None,
     "--cluster-dns: entry 1 'kube-dns' is not an IP address"),
    ("bad-node-ips", POD, ["--pod", "{tmp}/ok.yaml", *FLAGS, "--node-ips", "10.0.0.1,x"], None,
     "--node-ips: entry 2 'x' is not an IP address"),
    ("missing-flags", POD, ["--pod", "{tmp}/ok.yaml"], None,
     "the following arguments are required: --resolv-conf, --cluster-dns, --cluster-domain"),
    ("no-flags-at-all", {}, [], None, "the following arguments are required: --pod, --resolv-conf"),
    ("both-from-stdin", {}, ["--pod", "-", *kubelet_flags("-")], b"", "cannot both read stdin"),
    ("check-host-with-render-flags", POD, ["--check-host", "{host}", "--pod", "{tmp}/ok.yaml", "-o", "x"],
     None,
     "--check-host does not take --pod, -o"),
    ("check-host-file-missing", {}, ["--check-host", "{tmp}/none.conf"], None, "cannot read"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("create", "args", "stdin", "fragment"),
    [row[1:] for row in INPUT_ERRORS],
    ids=[row[0] for row in INPUT_ERRORS],
)
def test_unreadable_or_unusable_input_exits_2_with_a_clear_message(
    files: dict[str, str],
    tmp_path: Path,
    create: dict[str, bytes],
    args: list[str],
    stdin: bytes | None,
    fragment: str,
) -> None:
    for name, data in create.items():
        (tmp_path / name).write_bytes(data)

    def fill(text: str) -> str:
        return text.replace("{tmp}", str(tmp_path)).replace("{host}", files["host"])

    result = nodedns(*map(fill, args), stdin=stdin)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith("nodedns resolv-conf: error: ")
    assert fill(fragment) in result.stderr
    assert "Traceback" not in result.stderr


def test_an_unknown_flag_is_a_usage_error(files: dict[str, str]) -> None:
    result = nodedns("--pod", files["yaml"], "--frobnicate")
    assert result.returncode == 2
    assert "unrecognized arguments: --frobnicate" in result.stderr


# --- -o FILE: the atomic write -------------------------------------------------------------------------


def _leftovers(directory: Path, keep: set[str]) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name not in keep)


def test_output_file_is_written_with_mode_0644_whatever_the_umask(
    files: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "out" / "resolv.conf"
    out.parent.mkdir()
    result = nodedns("--pod", files["yaml"], *kubelet_flags(files["host"]), "-o", str(out), umask=0o077)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert out.read_text() == EXPECTED
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    assert _leftovers(out.parent, {"resolv.conf"}) == []


def test_output_replaces_an_existing_file_by_rename(files: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "resolv.conf.pod"
    out.write_text("old contents\n")
    out.chmod(0o600)
    old_inode = out.stat().st_ino
    result = nodedns("--pod", files["yaml"], *kubelet_flags(files["host"]), "-o", str(out))
    assert result.returncode == 0
    assert out.read_text() == EXPECTED
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    assert out.stat().st_ino != old_inode
    assert _leftovers(tmp_path, {"resolv.conf.pod", "pod.yaml", "pod.json", "resolv.conf"}) == []


def test_a_failure_mid_write_leaves_the_old_file_and_no_temp_file(
    files: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "resolv.conf.pod"
    out.write_text("old contents\n")

    def broken_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    code = main(["resolv-conf", "--pod", files["yaml"], *kubelet_flags(files["host"]), "-o", str(out)])
    assert code == 1
    assert out.read_text() == "old contents\n"
    assert _leftovers(tmp_path, {"resolv.conf.pod", "pod.yaml", "pod.json", "resolv.conf"}) == []
    assert (
        capsys.readouterr().err == f"nodedns resolv-conf: error: -o {out}: cannot write: Input/output error\n"
    )


def test_an_output_in_a_missing_directory_exits_1(files: dict[str, str], tmp_path: Path) -> None:
    result = nodedns("--pod", files["yaml"], *kubelet_flags(files["host"]), "-o", str(tmp_path / "no" / "f"))
    assert result.returncode == 1
    assert "cannot write: No such file or directory" in result.stderr
    assert "Traceback" not in result.stderr


def test_write_atomic_removes_its_temp_file_when_the_rename_fails(tmp_path: Path) -> None:
    target = tmp_path / "a-directory"
    target.mkdir()
    (target / "inside").write_text("x")
    with pytest.raises(OSError):
        write_atomic(str(target), b"data")
    assert _leftovers(tmp_path, {"a-directory"}) == []
    assert (target / "inside").read_text() == "x"


def test_write_atomic_writes_the_bytes_given(tmp_path: Path) -> None:
    target = tmp_path / "f"
    write_atomic(str(target), b"nameserver 1.1.1.1\n", mode=0o640)
    assert target.read_bytes() == b"nameserver 1.1.1.1\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


# --- --check-host --------------------------------------------------------------------------------------

CHECK_HOST = [
    ("clean", HOST, [], 0, []),
    ("29-domains-are-fine", "search " + " ".join(f"d{n}" for n in range(29)) + "\n", [], 0, []),
    ("30-domains-are-too-many", "search " + " ".join(f"d{n}" for n in range(30)) + "\n", [], 1,
     ["contains search line consisting of more than 29 domains!"]),
    ("30-domains-are-fine-without-a-cluster-domain", "search " + " ".join(f"d{n}" for n in range(30)) + "\n",
     ["--cluster-domain", ""], 0, []),
    ("a-long-entry-and-a-bare-nameserver", "nameserver\nsearch " + "a" * 254 + "\n", [], 1,
     ["line 1: nameserver line has no address",
      "contains a search path which length is more than allowed 253 chars!"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "extra", "code", "fragments"),
    [row[1:] for row in CHECK_HOST],
    ids=[row[0] for row in CHECK_HOST],
)
def test_check_host_prints_each_problem_and_exits_1_on_any(
    tmp_path: Path, text: str, extra: list[str], code: int, fragments: list[str]
) -> None:
    host = tmp_path / "resolv.conf"
    host.write_text(text)
    result = nodedns("--check-host", str(host), *extra)
    assert (result.returncode, result.stderr) == (code, "")
    lines = result.stdout.splitlines()
    assert len(lines) == len(fragments)
    for line, fragment in zip(lines, fragments, strict=True):
        assert line.startswith("Resolv.conf file ")
        assert fragment in line


# --- the command line as a whole -----------------------------------------------------------------------


def test_the_command_is_listed_and_yaml_is_imported_only_when_a_pod_is_read() -> None:
    code = (
        "import sys\n"
        "from nodedns.cli import build_parser\n"
        "build_parser().parse_args(['resolv-conf', '--check-host', 'x'])\n"
        "print('yaml' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert result.stdout == "False\n"
    listing = subprocess.run(
        [sys.executable, "-m", "nodedns", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert "resolv-conf" in listing.stdout
