#!/usr/bin/env python3
"""What `nodedns shadow` costs the node: its CPU seconds per 10,000 queries, beside the DNS it watches (as root).

A network namespace is the node: dnsmasq on its address answers the Service names of
examples/cluster.yaml (host records made from nodedns's own answers, so every answer matches), and
`nodedns shadow --interface any --port 53` watches it (the overlay's command line, with
`--max-rate` raised so that every query is judged). A Pod's namespace sends dnsperf at each
`--rates` figure for `--seconds`. For each rate: the queries dnsperf got answered, the CPU seconds
(utime + stime from /proc) of the shadow and of dnsmasq over the run, both per 10,000 queries, the
ratio shadow / dnsmasq, and the share of one core the shadow took at that rate. Then, at the last
rate, the same with the shadow's default `--max-rate` (2,000 judged a second): what the bound holds
it to, and how many were dropped.

    sudo python3 scripts/bench_shadow.py
    sudo python3 scripts/bench_shadow.py --rates 500,5000 --seconds 10
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.e2e.test_shadow_e2e import EXAMPLE, true_records  # noqa: E402
from tests.support.helpers import nodedns_cmd, subprocess_env  # noqa: E402
from tests.support.netns import netns, veth_pair  # noqa: E402

NODE_IP, CLIENT_IP = "10.244.0.89", "10.244.0.90"
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def shadow_doc(node: object) -> dict[str, object]:
    r = node.run(*nodedns_cmd("shadow", "--report", "--json"), env=subprocess_env(), timeout=30)  # type:
    # ignore[attr-defined]
    doc: dict[str, object] = json.loads(r.stdout)
    return doc


def run(rates: list[int], seconds: int) -> None:
    truth = true_records()
    print(f"nodedns shadow beside dnsmasq: dnsperf from a Pod's namespace, {seconds} s per rate, "
          f"{len(truth)} names; CPU from /proc (utime+stime)")
    print(f"{'max-rate':>9} {'offered':>8} {'answered':>9} {'judged':>8} {'dropped':>8} {'shadow CPU/10k':>15} "
          f"{'dnsmasq CPU/10k':>16} {'ratio':>6} {'shadow core share':>18}")
    with tempfile.TemporaryDirectory() as tmpdir, netns("node", "nd32b") as node, netns("pod", "nd32b") as pod:
        tmp = Path(tmpdir)
        veth_pair(node, pod, node_ip=NODE_IP, pod_ip=CLIENT_IP)
        data = tmp / "names.txt"
        data.write_text("".join(f"{n} A\n" for n in truth))
        records = [f"--host-record={n},{ip}" for n, ips in truth.items() for ip in ips]
        stand_in = subprocess.Popen([*node.exec_prefix, "dnsmasq", "--no-daemon", "--port=53", "--bind-interfaces",
                                     f"--listen-address={NODE_IP}", "--no-resolv", "--no-hosts",
                                     "--local=/cluster.local/", "--user=root", "--cache-size=0", *records],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for max_rate in ("50000", None):
                for rate in (rates if max_rate else rates[-1:]):
                    measure(node, pod, stand_in.pid, data, rate, seconds, max_rate, tmp)
        finally:
            stand_in.terminate()
            stand_in.wait(10)


def measure(node: object, pod: object, dnsmasq: int, data: Path, rate: int, seconds: int, max_rate: str | None,
            tmp: Path) -> None:
    extra = ["--max-rate", max_rate] if max_rate else []
    log = tmp / "shadow.log"
    with log.open("wb") as out:
        shadow = subprocess.Popen([*node.exec_prefix, *nodedns_cmd(  # type: ignore[attr-defined]
            "shadow", "--manifests", str(EXAMPLE), "--interface", "any", "--port", "53", "--upstream", "none",
            *extra)], env=subprocess_env(), stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while "ready:" not in log.read_text():
            if shadow.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the shadow did not start:\n{log.read_text()}")
            time.sleep(0.1)
        s0, d0 = cpu_seconds(shadow.pid), cpu_seconds(dnsmasq)
        r = pod.run("dnsperf", "-s", NODE_IP, "-d", str(data), "-Q", str(rate), "-l", str(seconds),  # type:
        # ignore[attr-defined]
                    timeout=seconds + 60)
        time.sleep(1.0)  # the last pairs judged (the shadow lags the traffic by a batch at most)
        s1, d1 = cpu_seconds(shadow.pid), cpu_seconds(dnsmasq)
        done = int(re.search(r"Queries completed:\s+(\d+)", r.stdout).group(1))  # type: ignore[union-attr]
        doc = shadow_doc(node)
        answers = doc["answers"]
        assert isinstance(answers, dict)
        dropped = doc["dropped"]
        assert isinstance(dropped, dict)
        judged = sum(int(v) for v in answers.values())
        per = 10_000 / max(done, 1)
        shadow_10k, dnsmasq_10k = (s1 - s0) * per, (d1 - d0) * per
        ratio = shadow_10k / dnsmasq_10k if dnsmasq_10k else float("nan")
        lost = sum(int(v) for v in dropped.values())
        print(f"{max_rate or '2000 (default)':>9} {rate:>8,} {done:>9,} {judged:>8,} {lost:>8,} "
              f"{shadow_10k:>13.2f} s {dnsmasq_10k:>14.2f} s {ratio:>5.1f}x {100 * (s1 - s0) / seconds:>16.1f} %")
    finally:
        shadow.terminate()
        shadow.wait(30)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--rates", default="500,2000,5000", help="dnsperf queries a second, comma-separated")
    p.add_argument("--seconds", type=int, default=10)
    args = p.parse_args()
    run([int(x) for x in args.rates.split(",")], args.seconds)


if __name__ == "__main__":
    main()
