"""The command line as a user types it: options anywhere, `serve --help` with every flag's choices and
default, and examples/config.yaml naming every key with its true default."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from nodedns import config as cfgmod
from nodedns.cli import parse_args
from nodedns.config import OPTIONS, Config
from tests.support.helpers import ROOT, nodedns_cmd, subprocess_env

CONFIG_EXAMPLE = ROOT / "examples" / "config.yaml"
# set in the example for a laptop run; every other active key holds its default
EXAMPLE_SETTINGS = {"manifests", "listen", "status-listen", "debug-listen"}
# defaults that depend on other keys or on the node: said in words, not a value
DERIVED = {"manifests", "kubeconfig", "node-name", "listen", "fallback-upstream", "upstream", "upstream-resolv-conf",
           "cluster-dns", "setup-interface", "lock-dir", "allow-from"}


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["lookup", "web.default.svc.cluster.local", "--status", "http://127.0.0.1:1", "AAAA"],
         {"name": "web.default.svc.cluster.local", "type": "AAAA", "endpoint": "http://127.0.0.1:1"}),
        (["lookup", "--json", "web.default.svc.cluster.local", "SRV", "--client", "10.244.0.5"],
         {"name": "web.default.svc.cluster.local", "type": "SRV", "json": True, "client": "10.244.0.5"}),
        (["explain", "--type", "A", "db.other", "--pod-ref", "default/client"],
         {"name": "db.other", "pod_ref": "default/client", "types": ["A"]}),
        (["resolv-conf", "--cluster-dns", "169.254.20.10", "--pod", "pod.yaml", "--cluster-domain", "cluster.local"],
         {"cluster_dns": "169.254.20.10", "pod": "pod.yaml"}),
        (["serve", "--workers", "2", "--manifests", "examples/cluster.yaml"],
         {"workers": "2", "manifests": "examples/cluster.yaml"}),
    ],
    ids=["lookup-type-after-an-option", "lookup-options-before-and-after", "explain-name-between-options",
         "resolv-conf", "serve"],
)
def test_options_and_operands_may_come_in_any_order(argv: list[str], expected: dict[str, Any]) -> None:
    args = vars(parse_args(argv))
    assert args["command"] == argv[0]
    assert {k: args[k] for k in expected} == expected


def test_a_stray_operand_is_still_an_error_naming_it() -> None:
    r = subprocess.run(nodedns_cmd("lookup", "a.example", "A", "extra"), env=subprocess_env(), capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2
    assert r.stderr.strip() == "nodedns lookup: error: unrecognized arguments: extra (see nodedns lookup --help)"


@pytest.fixture(scope="module")
def serve_help() -> str:
    r = subprocess.run(nodedns_cmd("serve", "--help"), env=subprocess_env(COLUMNS="400"), capture_output=True,
                       text=True, timeout=30, check=True)
    return r.stdout


@pytest.mark.parametrize("opt", OPTIONS, ids=[o.key for o in OPTIONS])
def test_serve_help_lists_every_flag_with_its_choices_and_default(opt: cfgmod.Option, serve_help: str) -> None:
    entries = [" ".join(e.split()) for e in re.split(r"\n(?=  -)", serve_help)]  # one per flag, unwrapped
    line = next((e for e in entries if e.startswith((f"--{opt.key} ", f"--{opt.key}\n")) or e == f"--{opt.key}"),
                None)
    assert line is not None, f"--{opt.key} is not in serve --help"
    assert f"(default: {opt.default})" in line
    if opt.choices:
        assert f"--{opt.key} {'|'.join(opt.choices)}" in line


def example_groups() -> list[tuple[str, list[str]]]:
    """examples/config.yaml's `# --- TITLE ---` headings, each with the keys under it (set or commented out)."""
    keys = {o.key for o in OPTIONS}
    groups: list[tuple[str, list[str]]] = []
    for line in CONFIG_EXAMPLE.read_text().splitlines():
        heading = re.fullmatch(r"# --- (.*?) -+", line)
        if heading:
            groups.append((heading.group(1), []))
            continue
        key = re.match(r"#? ?([a-z][a-z0-9-]*):", line)
        if key and key.group(1) in keys and groups and key.group(1) not in groups[-1][1]:
            groups[-1][1].append(key.group(1))
    return groups


def help_groups(text: str) -> list[tuple[str, list[str]]]:
    """`--help`'s argument groups after its general options: each title with its flags, in order."""
    groups: list[tuple[str, list[str]]] = []
    for line in text[text.index("\noptions:\n") + 1:].splitlines()[1:]:  # the groups follow the general options
        title = re.fullmatch(r"(\S.*):", line)
        if title:
            groups.append((title.group(1), []))
            continue
        flag = re.match(r"  (--[a-z][a-z0-9-]*)", line)
        if flag and groups:
            groups[-1][1].append(flag.group(1).removeprefix("--"))
    return groups


def test_serve_help_groups_the_flags_as_the_config_example_groups_its_keys(serve_help: str) -> None:
    shown = help_groups(serve_help)
    assert shown == example_groups()
    assert [title for title, _ in shown] == [title for title, _ in cfgmod.GROUPS]
    flat = [key for _, keys in shown for key in keys]
    assert sorted(flat) == sorted(o.key for o in OPTIONS if o.key != "config")  # each flag once, in a group
    general = serve_help[serve_help.index("\noptions:\n"):serve_help.index(f"\n{shown[0][0]}:\n")]
    assert "--config FILE" in general and "--manifests" not in general


def test_shadow_help_groups_the_flags_it_shares_with_serve_the_same_way() -> None:
    r = subprocess.run(nodedns_cmd("shadow", "--help"), env=subprocess_env(COLUMNS="400"), capture_output=True,
                       text=True, timeout=30, check=True)
    assert help_groups(r.stdout) == example_groups()


@pytest.mark.parametrize("opt", [o for o in OPTIONS if o.key not in DERIVED and o.key != "config"],
                         ids=[o.key for o in OPTIONS if o.key not in DERIVED and o.key != "config"])
def test_the_default_shown_is_the_default_used(opt: cfgmod.Option) -> None:
    used = getattr(Config(), opt.attr)
    if opt.default.split(":")[0] == "none" and "none" not in opt.choices:
        assert used in (None, (), "")
    elif opt.repeat:
        assert tuple(opt.parse(v) for v in opt.default.split(",")) == used
    else:
        assert opt.parse(opt.default) == used


def test_the_config_example_loads_and_serves_the_bundled_cluster() -> None:
    cfg = cfgmod.from_sources({"config": str(CONFIG_EXAMPLE)}, environ={})
    assert cfg.manifests == str(ROOT / "examples" / "cluster.yaml")  # from the file's folder
    assert cfg.listen == (("127.0.0.1", 5353),)


@pytest.mark.parametrize(("value", "resolved"), [
    ("cluster.yaml", "{folder}/cluster.yaml"),
    ("../data/cluster.yaml", "{folder}/../data/cluster.yaml"),
    ("/abs/cluster.yaml", "/abs/cluster.yaml"),
], ids=["beside-the-file", "up-and-over", "absolute"])
def test_a_relative_path_in_a_config_file_is_relative_to_its_folder(tmp_path: Path, value: str,
                                                                     resolved: str) -> None:
    folder = tmp_path / "conf"
    folder.mkdir()
    (folder / "nodedns.yaml").write_text(yaml.safe_dump({
        "manifests": value, "lock-dir": "roster", "ready-file": "ready", "host-resolv-conf": "",
        "upstream-resolv-conf": "resolv.conf", "kube-dns-config-dir": "kube-dns", "setup-interface": "dev0",
        "local-ip": "169.254.20.10"}))
    cfg = cfgmod.from_sources({"config": str(folder / "nodedns.yaml")}, environ={})
    assert cfg.manifests == resolved.format(folder=folder)
    assert (cfg.lock_dir, cfg.ready_file, cfg.upstream_resolv_conf, cfg.kube_dns_config_dir) == (
        f"{folder}/roster", f"{folder}/ready", f"{folder}/resolv.conf", f"{folder}/kube-dns")
    assert cfg.host_resolv_conf == "" and cfg.setup_interface == "dev0"  # '' (none) and a link name stay
    flags = cfgmod.from_sources({"config": str(folder / "nodedns.yaml"), "manifests": "mine.yaml"}, environ={})
    assert flags.manifests == "mine.yaml"  # a flag: from the current directory, as given


def test_the_config_example_names_every_key() -> None:
    text = CONFIG_EXAMPLE.read_text()
    active = set(yaml.safe_load(text))
    commented = set(re.findall(r"^# ([a-z-]+): ", text, flags=re.M))
    keys = {o.key for o in OPTIONS} - {"config"}  # a config file cannot name another
    assert keys - active - commented == set()
    assert active - keys == set()


@pytest.mark.parametrize("key", sorted(set(yaml.safe_load(CONFIG_EXAMPLE.read_text())) - EXAMPLE_SETTINGS))
def test_every_active_key_of_the_config_example_holds_its_default(key: str) -> None:
    value = yaml.safe_load(CONFIG_EXAMPLE.read_text())[key]
    assert getattr(cfgmod.build({key: value}, environ={}), key.replace("-", "_")) == \
        getattr(cfgmod.build({}, environ={}), key.replace("-", "_"))


# ----------------------------------------------------------------------------------------------
# The entry points: `python -m nodedns` and the version


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(nodedns_cmd(*args), env=subprocess_env(), capture_output=True, text=True, timeout=60)


def test_the_version_printed_is_the_packages_version() -> None:
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert version
    r = run_cli("--version")
    assert (r.returncode, r.stdout.strip()) == (0, f"nodedns {version.group(1)}")


@pytest.mark.parametrize(("args", "code", "says"), [
    (["no-such-command"], 2, "invalid choice: 'no-such-command'"),
    ([], 2, "the following arguments are required: COMMAND"),
    (["resolv-conf", "--no-such-flag"], 2, "nodedns resolv-conf: error: unrecognized arguments: --no-such-flag "
                                           "(see nodedns resolv-conf --help)"),
    (["guard", "--interface", "x", "--local-ip", "127.0.0.1", "--firewall", "none", "--failures", "0"], 2,
     "--failures: must be a whole number from 1 to 100"),
], ids=["unknown-command", "no-command", "unknown-flag", "a-command-saying-usage"])
def test_python_m_nodedns_exits_with_the_commands_status_and_one_line(args: list[str], code: int, says: str) -> None:
    r = run_cli(*args)
    assert r.returncode == code, r.stderr
    assert says in r.stderr and len(r.stderr.strip().splitlines()) <= 2, r.stderr



def test_every_command_is_listed_in_order_and_runs_its_help() -> None:
    """The seven commands the README shows, in `nodedns --help` in that order, each with a help page."""
    out = run_cli("--help").stdout
    listed = re.findall(r"^    (\S+)", out, re.M)
    assert listed == ["serve", "shadow", "guard", "resolv-conf", "lookup", "explain", "top"], out
    for command in listed:
        r = run_cli(command, "--help")
        assert r.returncode == 0 and r.stdout.startswith(f"usage: nodedns {command} "), r.stderr


ABBREVIATED = [
    (["serve", "--manifest", "examples/cluster.yaml"], "nodedns serve", "--manifest", "--manifests"),
    (["serve", "--status-l", "127.0.0.1:0"], "nodedns serve", "--status-l", "--status-listen"),
    (["lookup", "web.default.svc.cluster.local", "--deb", "http://127.0.0.1:1"], "nodedns lookup", "--deb",
     "--debug"),
    (["explain", "web", "--pod-ref", "default/x", "--typ", "A"], "nodedns explain", "--typ", "--type"),
    (["top", "--sor", "waste"], "nodedns top", "--sor", "--sort"),
    (["shadow", "--interf", "lo"], "nodedns shadow", "--interf", "--interface"),
    (["resolv-conf", "--pod", "x.yaml", "--cluster-d", "10.96.0.10"], "nodedns resolv-conf", "--cluster-d",
     "--cluster-dns"),
    (["guard", "--interface", "x", "--local-ip", "169.254.20.10", "--firewall", "none", "--probe-i", "1s"],
     "nodedns guard", "--probe-i", "--probe-interval"),
]


@pytest.mark.parametrize(("argv", "prog", "given", "meant"), ABBREVIATED, ids=[a[0][0] for a in ABBREVIATED])
def test_an_abbreviated_flag_is_refused_naming_the_flag_it_may_mean(argv: list[str], prog: str, given: str,
                                                                   meant: str) -> None:
    """A typo never quietly means another flag: argparse's abbreviations are off in every command."""
    r = subprocess.run(nodedns_cmd(*argv), env=subprocess_env(), capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r.stderr
    assert r.stdout == ""
    line, = r.stderr.splitlines()
    assert line.startswith(f"{prog}: error: unrecognized arguments: {given}")
    assert f"did you mean {meant}" in line and "never abbreviated" in line


@pytest.mark.parametrize(("given", "meant"), [
    ("--cache-ttl", "did you mean --cache-success-ttl or --cache-denial-ttl?"),  # its words, in the table's order
    ("--manifsts", "did you mean --manifests?"),  # a spelling
    ("--upstream-timout", "did you mean --upstream-timeout"),  # the closest first
])
def test_a_mistyped_flag_is_told_the_flag_it_means(given: str, meant: str) -> None:
    r = subprocess.run(nodedns_cmd("serve", given, "1s"), env=subprocess_env(), capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and meant in r.stderr, r.stderr
    assert "--cache-min-ttl" not in r.stderr  # the floor is not what a TTL cap's typo means


@pytest.mark.parametrize(("yaml_text", "said"), [
    ("cache-ttl: 30s\n", "nodedns: config error: cache-ttl: unknown key (did you mean cache-success-ttl or "
                         "cache-denial-ttl?)"),
    ("manifest: cluster.yaml\n", "nodedns: config error: manifest: unknown key (did you mean manifests?)"),
    ("setup_interfce: dns0\n", "nodedns: config error: setup-interfce: unknown key (did you mean setup-interface?)"),
    ("zzzz: 1\n", "nodedns: config error: zzzz: unknown key"),
], ids=["words", "begun", "spelling", "nothing-near"])
def test_an_unknown_config_key_is_told_the_key_it_means_as_a_flag_is(tmp_path: Path, yaml_text: str,
                                                                     said: str) -> None:
    """The config file's keys get the same help as the flags they mirror."""
    config = tmp_path / "config.yaml"
    config.write_text(yaml_text)
    r = subprocess.run(nodedns_cmd("serve", "--config", str(config)), env=subprocess_env(), capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2, r.stderr
    line, = r.stderr.strip().splitlines()
    assert line == said


def test_every_parser_of_every_command_refuses_abbreviations() -> None:
    from nodedns.cli import _subcommands, build_parser

    parser = build_parser()
    parsers = [parser, *_subcommands(parser).values()]
    assert len(parsers) == 8 and all(not p.allow_abbrev for p in parsers)
