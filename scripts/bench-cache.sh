#!/usr/bin/env bash
# Cached-answer cost: nodedns vs dnsmasq vs unbound as caching forwarders in front of one upstream.
#
#   scripts/bench-cache.sh            # ROUNDS=3 DURATION=5 RATE=20000 P99_SECONDS=5 by default
#   ROUNDS=5 DURATION=10 RATE=30000 scripts/bench-cache.sh
#
# An authoritative upstream (unbound, local-zone with 10,000 names + SOA) runs on 127.0.0.1; the
# three forwarders run pinned to CPU 1 (`taskset -c 1`) and are measured in turn, each primed right
# before its run, with dnsperf pinned to CPU 0 on the same query file (1,000 hot names repeated,
# ~5% NXDOMAIN), without and with EDNS (`dnsperf -e`), in ROUNDS interleaved rounds. Printed per
# server and mode (medians): QPS (unthrottled), CPU microseconds per answered query (utime+stime
# delta from /proc/PID/stat / queries completed), p99 latency at a fixed offered load (RATE qps, from
# dnsperf -v per-query latencies), and nodedns's CPU ratio to each peer. nodedns runs with its
# defaults (success TTL cap 30 s, denial cap 5 s), so it refreshes entries during the runs.
# SERVERS="nodedns dnsmasq" limits the run to some servers; add "floor" for the Python floor (a uvloop
# server that patches the ID into one fixed answer: what no Python hit path can beat), "nodedns-py"
# for nodedns with its C hit path turned off (NODEDNS_HIT_PATH=python), "nodedns-off" and
# "nodedns-py-off" for the same two with per-Pod insight turned off (--insight off): the ratio lines
# "insight on / off" say what counting every answer by client costs per cached answer (the budget:
# 5%), "nodedns-rl" and "nodedns-py-rl" for the two with the per-client rate limit on, as the
# DaemonSet's ConfigMap turns it on (`--rate-limit`): the ratio lines "rate limit on / off" say what
# counting every answer against its client's budget costs. dnsperf asks from one address, far faster
# than the ConfigMap's budget, so these run with RL_QPS (default 10000000, the largest) a second: a budget it
# never meets, which costs every answer what the ConfigMap's costs the answers of a client under it
# (the same count; only a client over its budget takes the limiter's slower path, by design).
# "nodedns-pol" and "nodedns-pol-other": nodedns with a DNS policy (docs/policy.md) in its manifests, a
# DNSPolicy with one deny rule no query of the run matches, applied to a Pod of the node at dnsperf's
# address 127.0.0.1 (every answer of the run goes to a Pod under a policy), or to another Pod (dnsperf
# is a Pod under no policy, beside one that is); the ratio lines "policy ... / none" compare each with
# "nodedns" in the same run; "nodedns-py-pol" is "nodedns-pol" with its C hit path turned off, its ratio
# line against "nodedns-py". BASE_TREE=DIR (another checkout, its C extensions built in place, e.g. a
# `git worktree` of the main branch) adds "nodedns-base" and "nodedns-base-pol": "nodedns" and "nodedns-pol"
# run from that tree, for the ratio lines "this tree / base": what a change costs a Pod under no policy
# and a Pod under one, side by side in one run.
# nodedns runs --workers 1: one process, as dnsmasq and unbound (num-threads 1) are.
# The "cluster" rows: cluster answers (2,000 ClusterIP Services, A queries over all of them), nodedns
# from its index (--manifests), unbound from the same names as `local-data`, dnsmasq as `host-record`s
# (each server's local, authoritative data: no upstream involved).
# Needs: dnsperf, dnsmasq, unbound, taskset (Debian packages). Every process it starts is stopped on exit.
set -euo pipefail

DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
RATE=${RATE:-20000}
P99_SECONDS=${P99_SECONDS:-5}
SERVERS=${SERVERS:-nodedns dnsmasq unbound}
NX_SHARE=${NX_SHARE:-0.05}
RL_QPS=${RL_QPS:-10000000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"  # `python -m nodedns` must find this checkout's package, whatever the caller's directory
export PYTHONSAFEPATH=1  # and only through PYTHONPATH (not a nodedns/ in the current directory)
PY=${PYTHON:-$([ -x "$ROOT/.venv/bin/python" ] && echo "$ROOT/.venv/bin/python" || echo python3)}  # the checkout's venv
for tool in dnsperf dnsmasq unbound taskset; do
  command -v "$tool" >/dev/null || { echo "bench-cache: $tool is not installed" >&2; exit 2; }
done
if [ "$(nproc)" -lt 2 ]; then echo "bench-cache: needs 2 CPUs (server on 1, dnsperf on 0)" >&2; exit 2; fi

WORK=$(mktemp -d /tmp/nodedns-bench.XXXXXX)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]:-}"; do
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]:-}"; do
    [ -n "$pid" ] && { timeout 5 tail --pid="$pid" -f /dev/null 2>/dev/null || kill -9 "$pid" 2>/dev/null || true; }
  done
  [ -n "${KEEP_WORK:-}" ] && echo "bench-cache: kept $WORK" >&2 || rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

BASE_TREE=${BASE_TREE:-}
case " $SERVERS " in
  *" nodedns-base "* | *" nodedns-base-pol "*)
    if [ -z "$BASE_TREE" ] || [ ! -d "$BASE_TREE/nodedns" ]; then
      echo "bench-cache: nodedns-base and nodedns-base-pol need BASE_TREE=DIR (a checkout holding nodedns/)" >&2
      exit 2
    fi ;;
esac

read -r UP_PORT ND_PORT DM_PORT UB_PORT FL_PORT NP_PORT NO_PORT NPO_PORT NR_PORT NPR_PORT PL_PORT PO_PORT \
  PPL_PORT BS_PORT BSP_PORT < <("$PY" - <<'EOF'
import socket
socks, ports = [], []
while len(ports) < 15:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 0))
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        t.bind(("127.0.0.1", u.getsockname()[1]))
    except OSError:
        u.close(); t.close(); continue
    socks += [u, t]; ports.append(u.getsockname()[1])
print(*ports)
EOF
)

# -- the upstream zone, the forwarders' configs, the query files -----------------------------------
"$PY" "$ROOT/scripts/bench_upstream.py" "$WORK" "$UP_PORT" "$UB_PORT" "$NX_SHARE"

LAST_PID=""
start() {  # start NAME PORT CMD... ; sets LAST_PID once it answers on its port
  local name=$1 port=$2; shift 2
  taskset -c 1 "$@" >"$WORK/$name.log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  LAST_PID=$pid
  for _ in $(seq 100); do
    if printf 'h1.bench.test A\n' | timeout 2 dnsperf -s 127.0.0.1 -p "$port" -n 1 -t 1 2>/dev/null \
        | grep -q 'Queries completed:.*1 (100'; then
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || { echo "bench-cache: $name died:" >&2; cat "$WORK/$name.log" >&2; exit 1; }
    sleep 0.2
  done
  echo "bench-cache: $name did not answer on port $port" >&2; cat "$WORK/$name.log" >&2; exit 1
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
CLK_TCK=$(getconf CLK_TCK)

prime() {  # prime PORT FLAG [FILE]: every name once (keys with and without EDNS are distinct)
  taskset -c 0 dnsperf -s 127.0.0.1 -p "$1" -d "${3:-$WORK/prime.txt}" -n 1 -Q 5000 $2 >/dev/null 2>&1
}
queries_of() { [ "$1" = cluster ] && echo "$WORK/cluster.txt" || echo "$WORK/queries.txt"; }
prime_of() { [ "$1" = cluster ] && echo "$WORK/prime-cluster.txt" || echo "$WORK/prime.txt"; }

unthrottled() {  # unthrottled NAME PORT PID MODE -> "cpu NAME MODE QPS CPU_US"
  local name=$1 port=$2 pid=$3 mode=$4 flag="" out before after completed qps
  [ "$mode" = edns ] && flag="-e"
  prime "$port" "$flag" "$(prime_of "$mode")"
  before=$(cpu_ticks "$pid")
  out=$(taskset -c 0 timeout $((DURATION + 30)) dnsperf -s 127.0.0.1 -p "$port" -d "$(queries_of "$mode")" \
        -c 10 -l "$DURATION" $flag 2>&1)
  after=$(cpu_ticks "$pid")
  completed=$(echo "$out" | awk '/Queries completed:/ {print $3}')
  qps=$(echo "$out" | awk '/Queries per second:/ {printf "%d", $4}')
  echo "cpu $name $mode $qps $(awk -v a="$before" -v b="$after" -v c="$completed" -v t="$CLK_TCK" \
       'BEGIN { if (c > 0) printf "%.3f", (b - a) / t * 1e6 / c; else print "nan" }')"
}

p99() {  # p99 NAME PORT MODE -> "p99 NAME MODE MS" at RATE qps offered
  local name=$1 port=$2 mode=$3 flag=""
  [ "$mode" = edns ] && flag="-e"
  prime "$port" "$flag" "$(prime_of "$mode")"
  echo "p99 $name $mode $(taskset -c 0 timeout $((P99_SECONDS + 30)) dnsperf -s 127.0.0.1 -p "$port" \
        -d "$(queries_of "$mode")" -c 10 -l "$P99_SECONDS" -Q "$RATE" -v $flag 2>/dev/null \
        | awk '/^> / {print $NF}' | sort -g \
        | awk '{v[NR]=$1} END { if (NR) printf "%.3f", v[int(NR*0.99)] * 1000; else print "nan" }')"
}

RESULTS=$WORK/results.txt
: >"$RESULTS"
want() { case " $SERVERS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
NAMES=(); PORTS=(); SPIDS=()

start upstream "$UP_PORT" unbound -d -c "$WORK/upstream.conf"
if want nodedns; then
  start nodedns "$ND_PORT" env PYTHONPATH="$ROOT" "$PY" -m nodedns serve --manifests "$WORK/cluster.yaml" \
    --listen "127.0.0.1:$ND_PORT" --upstream "127.0.0.1:$UP_PORT" --status-listen none --log-level warning --workers 1
  NAMES+=(nodedns); PORTS+=("$ND_PORT"); SPIDS+=("$LAST_PID")
  [ -n "${VERBOSE:-}" ] && echo "bench-cache: nodedns pid $LAST_PID" >&2
fi
if want nodedns-py; then  # the same agent with the C hit path turned off (NODEDNS_HIT_PATH=python)
  start nodedns-py "$NP_PORT" env PYTHONPATH="$ROOT" NODEDNS_HIT_PATH=python "$PY" -m nodedns serve \
    --manifests "$WORK/cluster.yaml" --listen "127.0.0.1:$NP_PORT" --upstream "127.0.0.1:$UP_PORT" \
    --status-listen none --log-level warning --workers 1
  NAMES+=(nodedns-py); PORTS+=("$NP_PORT"); SPIDS+=("$LAST_PID")
fi
if want nodedns-off; then  # nodedns with per-Pod insight off (--insight off): what counting by client costs
  start nodedns-off "$NO_PORT" env PYTHONPATH="$ROOT" "$PY" -m nodedns serve --manifests "$WORK/cluster.yaml" \
    --listen "127.0.0.1:$NO_PORT" --upstream "127.0.0.1:$UP_PORT" --status-listen none --log-level warning \
    --workers 1 --insight off
  NAMES+=(nodedns-off); PORTS+=("$NO_PORT"); SPIDS+=("$LAST_PID")
fi
if want nodedns-py-off; then
  start nodedns-py-off "$NPO_PORT" env PYTHONPATH="$ROOT" NODEDNS_HIT_PATH=python "$PY" -m nodedns serve \
    --manifests "$WORK/cluster.yaml" --listen "127.0.0.1:$NPO_PORT" --upstream "127.0.0.1:$UP_PORT" \
    --status-listen none --log-level warning --workers 1 --insight off
  NAMES+=(nodedns-py-off); PORTS+=("$NPO_PORT"); SPIDS+=("$LAST_PID")
fi
if want nodedns-rl; then  # nodedns with the per-client rate limit on (a budget dnsperf never meets: RL_QPS)
  start nodedns-rl "$NR_PORT" env PYTHONPATH="$ROOT" "$PY" -m nodedns serve --manifests "$WORK/cluster.yaml" \
    --listen "127.0.0.1:$NR_PORT" --upstream "127.0.0.1:$UP_PORT" --status-listen none --log-level warning \
    --workers 1 --rate-limit "$RL_QPS"
  NAMES+=(nodedns-rl); PORTS+=("$NR_PORT"); SPIDS+=("$LAST_PID")
fi
if want nodedns-py-rl; then
  start nodedns-py-rl "$NPR_PORT" env PYTHONPATH="$ROOT" NODEDNS_HIT_PATH=python "$PY" -m nodedns serve \
    --manifests "$WORK/cluster.yaml" --listen "127.0.0.1:$NPR_PORT" --upstream "127.0.0.1:$UP_PORT" \
    --status-listen none --log-level warning --workers 1 --rate-limit "$RL_QPS"
  NAMES+=(nodedns-py-rl); PORTS+=("$NPR_PORT"); SPIDS+=("$LAST_PID")
fi
policy_manifests() {  # policy_manifests FILE IP: the cluster, a Pod of node "bench" at IP under a DNSPolicy
  { cat "$WORK/cluster.yaml"; printf -- '\n---\n'
    "$PY" -c 'import json, sys; ip = sys.argv[1]
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "client", "namespace": "default", "labels": {"app": "bench"}},
   "spec": {"nodeName": "bench", "containers": [{"name": "c", "image": "x"}]}, "status": {"podIP": ip, "phase": "Running"}},
  {"apiVersion": "nodedns.io/v1alpha1", "kind": "DNSPolicy", "metadata": {"name": "bench", "namespace": "default"},
   "spec": {"podSelector": {"matchLabels": {"app": "bench"}},
            "rules": [{"names": [".blocked.invalid"], "action": "deny"}]}}]}))' "$2"; } >"$1"
}
if want nodedns-pol; then  # every answer to a Pod under a DNS policy
  policy_manifests "$WORK/cluster-policy.yaml" 127.0.0.1
  start nodedns-pol "$PL_PORT" env PYTHONPATH="$ROOT" "$PY" -m nodedns serve --manifests "$WORK/cluster-policy.yaml" \
    --node-name bench --listen "127.0.0.1:$PL_PORT" --upstream "127.0.0.1:$UP_PORT" --status-listen none \
    --log-level warning --workers 1
  NAMES+=(nodedns-pol); PORTS+=("$PL_PORT"); SPIDS+=("$LAST_PID")
fi
if want nodedns-py-pol; then  # every answer to a Pod under a DNS policy, the C hit path turned off
  policy_manifests "$WORK/cluster-policy-py.yaml" 127.0.0.1
  start nodedns-py-pol "$PPL_PORT" env PYTHONPATH="$ROOT" NODEDNS_HIT_PATH=python "$PY" -m nodedns serve \
    --manifests "$WORK/cluster-policy-py.yaml" --node-name bench --listen "127.0.0.1:$PPL_PORT" \
    --upstream "127.0.0.1:$UP_PORT" --status-listen none --log-level warning --workers 1
  NAMES+=(nodedns-py-pol); PORTS+=("$PPL_PORT"); SPIDS+=("$LAST_PID")
fi
if want nodedns-base; then  # "nodedns" from BASE_TREE (the tree this one is compared with)
  start nodedns-base "$BS_PORT" env PYTHONPATH="$BASE_TREE" "$PY" -m nodedns serve --manifests "$WORK/cluster.yaml" \
    --listen "127.0.0.1:$BS_PORT" --upstream "127.0.0.1:$UP_PORT" --status-listen none --log-level warning --workers 1
  NAMES+=(nodedns-base); PORTS+=("$BS_PORT"); SPIDS+=("$LAST_PID")
fi
if want nodedns-base-pol; then  # "nodedns-pol" from BASE_TREE
  policy_manifests "$WORK/cluster-policy-base.yaml" 127.0.0.1
  start nodedns-base-pol "$BSP_PORT" env PYTHONPATH="$BASE_TREE" "$PY" -m nodedns serve \
    --manifests "$WORK/cluster-policy-base.yaml" --node-name bench --listen "127.0.0.1:$BSP_PORT" \
    --upstream "127.0.0.1:$UP_PORT" --status-listen none --log-level warning --workers 1
  NAMES+=(nodedns-base-pol); PORTS+=("$BSP_PORT"); SPIDS+=("$LAST_PID")
fi
if want nodedns-pol-other; then  # a policy on another Pod: dnsperf is a Pod under none
  policy_manifests "$WORK/cluster-policy-other.yaml" 10.244.0.99
  start nodedns-pol-other "$PO_PORT" env PYTHONPATH="$ROOT" "$PY" -m nodedns serve \
    --manifests "$WORK/cluster-policy-other.yaml" --node-name bench --listen "127.0.0.1:$PO_PORT" \
    --upstream "127.0.0.1:$UP_PORT" --status-listen none --log-level warning --workers 1
  NAMES+=(nodedns-pol-other); PORTS+=("$PO_PORT"); SPIDS+=("$LAST_PID")
fi
if want dnsmasq; then
  start dnsmasq "$DM_PORT" dnsmasq -k --no-resolv --no-hosts --no-poll --user=root \
    --listen-address=127.0.0.1 --bind-interfaces --port="$DM_PORT" --server="127.0.0.1#$UP_PORT" \
    --cache-size=10000 --pid-file= --log-facility=- --conf-file="$WORK/dnsmasq-cluster.conf"
  NAMES+=(dnsmasq); PORTS+=("$DM_PORT"); SPIDS+=("$LAST_PID")
fi
if want floor; then  # not a DNS server: the Python floor (uvloop, one fixed answer, ID patched)
  cat >"$WORK/floor.py" <<'EOF'
import asyncio, sys, uvloop
ANSWER = bytes.fromhex("0000818000010001000000000268310562656e636804746573740000010001c00c000100010000001e00040a000001")
class Floor(asyncio.DatagramProtocol):
    def connection_made(self, transport): self.sendto = transport.sendto
    def datagram_received(self, data, addr): self.sendto(data[:2] + ANSWER[2:], addr)
async def main():
    await asyncio.get_running_loop().create_datagram_endpoint(Floor, local_addr=("127.0.0.1", int(sys.argv[1])))
    await asyncio.Event().wait()
uvloop.run(main())
EOF
  start floor "$FL_PORT" "$PY" "$WORK/floor.py" "$FL_PORT"
  NAMES+=(floor); PORTS+=("$FL_PORT"); SPIDS+=("$LAST_PID")
fi
if want unbound; then
  start unbound "$UB_PORT" unbound -d -c "$WORK/unbound.conf"
  NAMES+=(unbound); PORTS+=("$UB_PORT"); SPIDS+=("$LAST_PID")
fi

# Interleaved rounds (server after server, mode after mode), so drift on a shared machine hits all alike.
MODES=${MODES:-plain edns cluster}
for round in $(seq "$ROUNDS"); do
  for mode in $MODES; do
    for i in "${!NAMES[@]}"; do
      unthrottled "${NAMES[$i]}" "${PORTS[$i]}" "${SPIDS[$i]}" "$mode" >>"$RESULTS"
    done
  done
done
for mode in $MODES; do
  for i in "${!NAMES[@]}"; do
    p99 "${NAMES[$i]}" "${PORTS[$i]}" "$mode" >>"$RESULTS"
  done
done

"$PY" - "$RESULTS" "$DURATION" "$RATE" "$ROUNDS" <<'EOF'
import statistics, sys
from collections import defaultdict
cpu, qps, p99 = defaultdict(list), defaultdict(list), {}
for line in open(sys.argv[1]):
    parts = line.split()
    if parts and parts[0] == "cpu":
        _, name, mode, q, c = parts
        qps[(name, mode)].append(float(q))
        cpu[(name, mode)].append(float(c))
    elif parts and parts[0] == "p99":
        p99[(parts[1], parts[2])] = float(parts[3])
print(f"cached answers (plain, edns: forwarded; cluster: local data): median of {sys.argv[4]} interleaved runs of {sys.argv[2]} s each; server on CPU 1, "
      f"dnsperf -c 10 on CPU 0; p99 at {sys.argv[3]} qps offered")
print(f"{'server':<14} {'queries':<7} {'QPS':>9} {'CPU/answer':>11} {'(runs)':<24} {'p99':>9}")
med = {}
for (name, mode), values in cpu.items():
    med[(name, mode)] = statistics.median(values)
    runs = " ".join(f"{v:.2f}" for v in values)
    print(f"{name:<14} {mode:<7} {statistics.median(qps[(name, mode)]):>9,.0f} {med[(name, mode)]:>8.2f} us "
          f"({runs:<22}) {p99.get((name, mode), float('nan')):>6.3f} ms")
print()
for ours in ("nodedns", "nodedns-rl"):
    for mode in ("plain", "edns", "cluster"):
        nd = med.get((ours, mode))
        for peer in ("dnsmasq", "unbound"):
            other = med.get((peer, mode))
            if nd and other:
                print(f"{ours} / {peer:<8} CPU per answer ({mode}): {nd / other:.2f}x")
for on, off in (("nodedns", "nodedns-off"), ("nodedns-py", "nodedns-py-off")):
    for mode in ("plain", "edns", "cluster"):
        a, b = med.get((on, mode)), med.get((off, mode))
        if a and b:
            print(f"{on} insight on / off CPU per answer ({mode}): {a / b:.3f}x ({(a / b - 1) * 100:+.1f}%)")
for on, off in (("nodedns-rl", "nodedns"), ("nodedns-py-rl", "nodedns-py")):
    for mode in ("plain", "edns", "cluster"):
        a, b = med.get((on, mode)), med.get((off, mode))
        if a and b:
            print(f"{off} rate limit on / off CPU per answer ({mode}): {a / b:.3f}x ({(a / b - 1) * 100:+.1f}%)")
for on, off, what in (("nodedns-pol", "nodedns", "a Pod under it"), ("nodedns-pol-other", "nodedns", "a Pod under none"),
                      ("nodedns-py-pol", "nodedns-py", "a Pod under it"),
                      ("nodedns-base-pol", "nodedns-base", "a Pod under it")):
    for mode in ("plain", "edns", "cluster"):
        a, b = med.get((on, mode)), med.get((off, mode))
        if a and b:
            print(f"{off} policy ({what}) / none CPU per answer ({mode}): {a / b:.3f}x ({(a / b - 1) * 100:+.1f}%)")
for ours, base, what in (("nodedns", "nodedns-base", "a Pod under no policy"),
                         ("nodedns-pol", "nodedns-base-pol", "a Pod under a policy")):
    for mode in ("plain", "edns", "cluster"):
        a, b = med.get((ours, mode)), med.get((base, mode))
        if a and b:
            print(f"this tree / base ({what}) CPU per answer ({mode}): {a / b:.3f}x ({(a / b - 1) * 100:+.1f}%)")
EOF
