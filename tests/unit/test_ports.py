"""The tests' free ports: each xdist worker's own range, below the kernel's ephemeral ports."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.support import ports


def ephemeral() -> range:
    lo, hi = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    return range(lo, hi + 1)


@pytest.mark.parametrize("workers", [1, 2, 3, 9])
def test_the_workers_ranges_are_apart_and_below_the_ephemeral_ports(workers: int) -> None:
    ranges = [ports.worker_range(f"gw{n}", workers) for n in range(workers)]
    assert all(r is not None and len(r) >= 1000 for r in ranges)
    taken = [p for r in ranges for p in r]  # type: ignore[union-attr]
    assert len(set(taken)) == len(taken)  # no port in two ranges
    assert min(taken) >= ports.BASE and max(taken) < ephemeral().start
    assert ports.worker_range("") is None and ports.worker_range("master") is None


def test_a_worker_gets_free_ports_of_its_own_range_and_skips_a_taken_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
    own = ports.worker_range()
    assert own is not None
    monkeypatch.setattr(ports, "_cursor", [0])
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as held:
        try:
            held.bind(("127.0.0.1", own[0]))
        except OSError:
            pytest.skip(f"port {own[0]} is in use on this machine")
        first, second = ports.free_port(), ports.free_port()
    assert first == own[1] and second == own[2]  # own[0] is taken for UDP: skipped
    for port in (first, second):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", port))


def test_outside_xdist_the_kernel_picks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    port = ports.free_port()
    assert port in ephemeral()
