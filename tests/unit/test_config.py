"""nodedns.config: the values each key takes (durations, numbers at their bounds), where the node name comes
from, and which source wins (flags over the config file over the defaults)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodedns.config import build, from_sources, parse_duration
from nodedns.errors import ConfigError


@pytest.mark.parametrize(("text", "seconds"), [
    ("500ms", 0.5), ("5s", 5.0), ("1m30s", 90.0), ("1h", 3600.0), ("5", 5.0), ("0.25", 0.25), (" 2S ", 2.0),
    (3, 3.0),
], ids=["ms", "s", "m-s", "h", "bare-number", "fraction", "spaces-and-case", "an-int"])
def test_durations_read_as_go_writes_them(text: str | int, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "1mx2s", "5s!", "-1s", "inf", "nan", "1m 30s"],
                         ids=["empty", "a-word", "junk-between-parts", "junk-after", "negative", "inf", "nan",
                              "a-space-between-parts"])
def test_what_is_no_duration_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(("key", "value", "ok"), [
    ("max-udp-size", "512", True), ("max-udp-size", "511", False), ("max-udp-size", "65535", True),
    ("max-udp-size", "65536", False), ("tcp-idle-timeout", "0s", False), ("workers", "0", True),
], ids=["udp-512", "udp-511", "udp-65535", "udp-65536", "idle-0", "workers-0"])
def test_numbers_are_taken_at_their_bounds_and_refused_past_them(key: str, value: str, ok: bool) -> None:
    raw = {"manifests": "examples/cluster.yaml", key: value}
    if ok:
        build(raw, environ={})
    else:
        with pytest.raises(ConfigError, match=f"^{key}: "):
            build(raw, environ={})


def test_the_node_name_comes_from_the_flag_else_from_node_name_in_the_environment() -> None:
    assert build({"manifests": "x.yaml"}, environ={"NODE_NAME": "node-b"}).node_name == "node-b"
    assert build({"manifests": "x.yaml", "node-name": "node-a"}, environ={"NODE_NAME": "node-b"}).node_name == "node-a"
    assert build({"manifests": "x.yaml"}, environ={}).node_name == ""


def test_flags_win_over_the_config_file(tmp_path: Path) -> None:
    path = tmp_path / "nodedns.yaml"
    path.write_text("manifests: examples/cluster.yaml\nttl: 10s\nmax-udp-size: 1400\n")
    cfg = from_sources({"config": str(path), "ttl": "20s"}, environ={})
    # (a relative path in the file is from the file's folder)
    assert (cfg.ttl, cfg.max_udp_size, cfg.manifests) == (20, 1400, str(tmp_path / "examples" / "cluster.yaml"))


def test_a_listen_address_given_twice_and_both_sources_of_the_cluster_are_refused() -> None:
    with pytest.raises(ConfigError, match="^listen: an address is listed twice"):
        build({"manifests": "x.yaml", "listen": ["127.0.0.1:53", "127.0.0.1:53"]}, environ={})
    with pytest.raises(ConfigError, match="^manifests: give either manifests or kubeconfig"):
        build({"manifests": "x.yaml", "kubeconfig": "k"}, environ={})
