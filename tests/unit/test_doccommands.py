"""The rules that find the commands in the documents and compare their output (tests/support/doccommands.py)."""

from __future__ import annotations

import re

import pytest

from tests.support.doccommands import (
    COMMANDS,
    DOCS,
    SKIPS,
    DocCommand,
    compare,
    extract,
    normalize,
    readme_serve,
    skip_reason,
    status_address,
)
from tests.support.helpers import ROOT

FENCE = "```"


def doc(*lines: str) -> str:
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (doc("text $ not a command", FENCE + "sh", "nodedns lookup web", "# a comment", "", "dig +short web", FENCE),
         [("nodedns lookup web", None, 0), ("dig +short web", None, 0)]),
        (doc(FENCE, "$ nodedns lookup web", "web. A", "  rcode: NOERROR", "$ true", FENCE),
         [("nodedns lookup web", ("web. A", "  rcode: NOERROR"), 0), ("true", None, 0)]),
        (doc(FENCE + "console", "$ nodedns lookup web --debug http://127.0.0.1:1       (exit 1)", "nodedns: cannot",
             FENCE),
         [("nodedns lookup web --debug http://127.0.0.1:1", ("nodedns: cannot",), 1)]),
        (doc(FENCE, "$ nodedns resolv-conf --check-host bad.conf", "problem", "$ echo $?", "1", FENCE),
         [("nodedns resolv-conf --check-host bad.conf", ("problem",), 1)]),
        (doc(FENCE + "sh", "nodedns serve --manifests examples/cluster.yaml \\", "    --listen 127.0.0.1:5353", FENCE),
         [("nodedns serve --manifests examples/cluster.yaml --listen 127.0.0.1:5353", None, 0)]),
        (doc(FENCE + "yaml", "key: value", FENCE, FENCE, "plain text", FENCE, FENCE + "json", '{"a": 1}', FENCE), []),
        (doc("- a list item:", "", "  " + FENCE + "sh", "  nodedns lookup web", "  " + FENCE),
         [("nodedns lookup web", None, 0)]),
        (doc(FENCE + "sh", "kubectl get pods   # on the cluster", FENCE),
         [("kubectl get pods   # on the cluster", None, 0)]),
    ],
    ids=["sh-block-every-line", "transcript-with-output", "exit-annotation", "echo-status-is-the-exit",
         "continuation-lines", "no-commands-elsewhere", "indented-fence", "comment-left-to-the-shell"],
)
def test_commands_and_their_shown_output_are_found(text: str,
                                                   expected: list[tuple[str, tuple[str, ...] | None, int]]) -> None:
    got = [(c.command, c.output, c.exit) for c in extract("doc.md", text)]
    assert got == expected


def test_a_command_knows_where_it_is() -> None:
    cmds = extract("docs/x.md", doc("# title", "", FENCE + "sh", "true", FENCE))
    assert cmds == [DocCommand("docs/x.md", 4, "true")] and cmds[0].where == "docs/x.md:4"


@pytest.mark.parametrize(
    ("shown", "actual", "missing"),
    [
        (["web.default.svc.cluster.local. 5 IN A 10.96.12.34"],
         "web.default.svc.cluster.local.\t3\tIN\tA\t10.96.12.34\n", []),
        (["web.default.svc.cluster.local. 5 IN A 10.96.12.34"], "web.default.svc.cluster.local. 5 IN A 10.96.12.35\n",
         ["web.default.svc.cluster.local. <v> IN A 10.96.12.34"]),
        ([";; ->>HEADER<<- opcode: QUERY, status: NOERROR, id: 1"],
         ";; ->>HEADER<<- opcode: QUERY, status: NOERROR, id: 64001\n", []),
        ([";; ->>HEADER<<- opcode: QUERY, status: NOERROR, id: 1"],
         ";; ->>HEADER<<- opcode: QUERY, status: NXDOMAIN, id: 1\n",
         [";; ->>HEADER<<- opcode: QUERY, status: NOERROR, id: <v>"]),
        (["  path: cluster index (built now; index generation 51, synced)", "  ttl left: 5s"],
         "  path:     cluster index (built now; index generation 54, synced)\nextra\n  ttl left: 3s\n", []),
        (["b", "a"], "a\nb\n", ["a"]),
        (["first", "...", "last"], "first\nmiddle\nlast\n", []),
        (["search d0.example ... d29.example"], "search d0.example d1.example d29.example\n", []),
        (["INFO nodedns.app: ready: services 13"], "2026-11-25 11:30:48,009 INFO nodedns.app: ready: services 13\n",
         []),
        (["cluster.local. 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 1795313281 7200 1800 86400 5"],
         "cluster.local.\t\t5\tIN\tSOA\tns.dns.cluster.local. hostmaster.cluster.local. 1795606107 7200 1800 86400 5\n",
         []),
    ],
    ids=["ttl-and-whitespace", "an-address-differs", "dig-id", "dig-rcode-differs", "generation-and-ttl-left",
         "order-matters", "elided-lines", "elided-within-a-line", "log-time-stamp", "soa-serial"],
)
def test_shown_output_is_compared_modulo_what_moves(shown: list[str], actual: str, missing: list[str]) -> None:
    assert compare(shown, actual) == missing


def test_normalizing_keeps_what_does_not_move() -> None:
    assert normalize("0 100 80 web.default.svc.cluster.local.") == "0 100 80 web.default.svc.cluster.local."
    assert normalize("nameserver 10.96.0.10") == "nameserver 10.96.0.10"


# ----------------------------------------------------------------------------------------------
# The documents themselves


def test_no_command_hides_outside_a_fenced_block() -> None:
    """An indented code block (four spaces) is a code block too: a `$ ` line there would not be run."""
    for path in DOCS:
        inside = False
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if line.lstrip().startswith(FENCE):
                inside = not inside
            elif not inside and re.match(r"\s{4,}\$ ", line):
                raise AssertionError(f"{path.relative_to(ROOT)}:{n}: a command outside a fenced block: {line.strip()}")


def test_the_documents_show_commands_and_most_of_them_run() -> None:
    run = [c for c in COMMANDS if skip_reason(c) is None]
    assert {c.path for c in run} >= {"README.md", "docs/status.md", "docs/beyond.md", "docs/resolvconf.md"}
    assert len(run) >= 40, len(run)


@pytest.mark.parametrize(("pattern", "reason"), SKIPS, ids=[r[:40] for _, r in SKIPS])
def test_every_skip_has_a_reason_and_is_used(pattern: str, reason: str) -> None:
    assert len(reason) > 20
    assert any(re.search(pattern, c.command) for c in COMMANDS), f"no document command matches {pattern!r}"


def test_the_quick_start_agent_is_the_readmes() -> None:
    assert readme_serve().split()[1:] == ["serve", "--manifests", "examples/cluster.yaml", "--listen", "127.0.0.1:5353"]


@pytest.mark.parametrize(
    ("command", "address"),
    [
        ("nodedns serve --manifests examples/cluster.yaml", "127.0.0.1:9253"),
        ("nodedns serve --manifests m.yaml --status-listen 127.0.0.1:19253", "127.0.0.1:19253"),
        ("nodedns serve --manifests m.yaml --status-listen none", None),
        ("nodedns serve --config examples/config.yaml", "127.0.0.1:9263"),
    ],
    ids=["default", "flag", "none", "config-file"],
)
def test_the_agents_readiness_is_asked_where_it_listens(command: str, address: str | None) -> None:
    assert status_address(command) == address
