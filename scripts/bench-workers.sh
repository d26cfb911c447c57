#!/usr/bin/env bash
# --workers 1 vs 2 on this machine's two cores: queries per second and CPU per answer.
#
#   scripts/bench-workers.sh              # ROUNDS=3 DURATION=5 WORKLOADS="hits misses asks"
#   ROUNDS=5 DURATION=10 scripts/bench-workers.sh
#
# nodedns serves the example cluster (examples/cluster.yaml) on 127.0.0.1; dnsperf 2.10 sends, from 32
# sockets, unthrottled, for DURATION seconds, one of two workloads:
#
#   hits        cached cluster names (A, AAAA, SRV, PTR, NXDOMAIN): every answer from the hit path
#               after priming. The agent is cheap per answer; dnsperf (one thread) needs a core.
#   misses      a new name for every query (NXDOMAIN: no such Service in namespace default, the shape
#               of a search-list expansion): every answer from the slow path (parse, decide, build,
#               store). With workers, each decides these alone from what exists (nodedns.cluster.existence).
#               The agent is the bottleneck, dnsperf is not.
#   asks        a new name below an existing Service for every query (nx-N.web.default.svc...:
#               NXDOMAIN, the index decides): with workers, every one is asked of the supervisor over
#               the channel (a batch per event loop turn) and computed there.
#
# Three set-ups per workload, in ROUNDS interleaved rounds (medians):
#
#   1w-1cpu     --workers 1, the agent pinned to CPU 1, dnsperf to CPU 0: no competition for the
#               agent's core (the single-process figure of scripts/bench-cache.sh)
#   1w-2cpu     --workers 1, agent and dnsperf both on CPUs 0-1 (the scheduler shares them)
#   2w-2cpu     --workers 2, agent and dnsperf both on CPUs 0-1: two processes answer in parallel,
#               but dnsperf takes a good part of the same two cores
#
# Printed per workload and set-up: QPS, the agent's CPU per answer (utime+stime of the supervisor and
# all its workers from /proc / answers), the agent's and dnsperf's CPU use in cores (CPU time / the
# run's wall time). The machine has only two
# cores, and with hits the load generator needs one of them: the 2-worker figure is then what two
# workers reach while sharing both cores with dnsperf, not what they reach on two cores of their own;
# misses and asks show the parallelism better (dnsperf needs little there). Needs dnsperf, taskset and
# /usr/bin/time. Every process it starts is stopped on exit.
set -euo pipefail

DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
SETUPS=${SETUPS:-1w-1cpu 1w-2cpu 2w-2cpu}
WORKLOADS=${WORKLOADS:-hits misses asks}
NAME=bench-workers
source "$(dirname "$0")/lib.sh"
require dnsperf taskset /usr/bin/time
if [ "$(nproc)" -lt 2 ]; then echo "bench-workers: needs 2 CPUs" >&2; exit 2; fi
echo "$CLUSTER_QUERIES" >"$WORK/hits.txt"
awk 'BEGIN { srand(7); for (i = 0; i < 400000; i++) printf "n%d-%d.default.svc.cluster.local A\n", i, int(rand() * 1e9) }' \
  >"$WORK/misses.txt"  # more names than a run can ask for: no name is asked twice
awk 'BEGIN { srand(11); for (i = 0; i < 400000; i++) printf "nx%d-%d.web.default.svc.cluster.local A\n", i, int(rand() * 1e9) }' \
  >"$WORK/asks.txt"

CLK_TCK=$(getconf CLK_TCK)
ticks() {  # utime+stime of a process and all below it (the zygote the workers are forked from, the workers)
  local total pid
  total=$(awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0)
  for pid in $(cat "/proc/$1/task/$1/children" 2>/dev/null); do
    total=$((total + $(ticks "$pid")))
  done
  echo "$total"
}

run() {  # run WORKLOAD SETUP -> "WORKLOAD SETUP QPS CPU_US AGENT_CORES PERF_CORES"
  local workload=$1 setup=$2 workers agent_cpus perf_cpus port pid before after out completed qps perf_cpu elapsed
  case $setup in
    1w-1cpu) workers=1 agent_cpus=1 perf_cpus=0 ;;
    1w-2cpu) workers=1 agent_cpus=0,1 perf_cpus=0,1 ;;
    2w-2cpu) workers=2 agent_cpus=0,1 perf_cpus=0,1 ;;
    *) echo "bench-workers: unknown set-up $setup" >&2; exit 2 ;;
  esac
  port=$("$PY" -c "from tests.support.helpers import free_port; print(free_port())")
  taskset -c "$agent_cpus" "$PY" -m nodedns serve --manifests examples/cluster.yaml --listen "127.0.0.1:$port" \
    --status-listen none --workers "$workers" --lameduck 0s --upstream none >"$WORK/agent-$setup.log" 2>&1 &
  pid=$!
  track "$pid"
  for _ in $(seq 200); do
    if printf 'web.default.svc.cluster.local A\n' | timeout 2 dnsperf -s 127.0.0.1 -p "$port" -n 1 -t 1 2>/dev/null \
        | grep -q 'Queries completed:.*1 (100'; then break; fi
    kill -0 "$pid" 2>/dev/null || { echo "bench-workers: the agent died" >&2; cat "$WORK/agent-$setup.log" >&2; exit 1; }
    sleep 0.1
  done
  sleep 0.5  # every worker bound (they start together; the first answer may come from one of them)
  taskset -c "$perf_cpus" dnsperf -s 127.0.0.1 -p "$port" -d "$WORK/hits.txt" -c 32 -l 1 >/dev/null 2>&1  # prime
  before=$(ticks "$pid")
  out=$( { /usr/bin/time -f "PERF_CPU %U %S %e" taskset -c "$perf_cpus" dnsperf -s 127.0.0.1 -p "$port" \
           -d "$WORK/$workload.txt" -c 32 -q 2000 -l "$DURATION"; } 2>&1 )
  after=$(ticks "$pid")
  kill "$pid"
  wait_gone "$pid" 15 || true
  completed=$(echo "$out" | awk '/Queries completed:/ {print $3}')
  qps=$(echo "$out" | awk '/Queries per second:/ {printf "%d", $4}')
  perf_cpu=$(echo "$out" | awk '/^PERF_CPU/ {print $2 + $3}')
  elapsed=$(echo "$out" | awk '/^PERF_CPU/ {print $4}')  # dnsperf's run: DURATION plus the wait for late answers
  echo "$workload $setup $qps $(awk -v a="$before" -v b="$after" -v c="$completed" -v t="$CLK_TCK" -v d="$elapsed" \
       -v p="$perf_cpu" 'BEGIN { printf "%.2f %.2f %.2f", (b - a) / t * 1e6 / c, (b - a) / t / d, p / d }')"
}

echo "nodedns --workers: $ROUNDS rounds of ${DURATION}s per set-up on $(nproc) CPUs; dnsperf runs on the same machine"
for r in $(seq "$ROUNDS"); do
  for workload in $WORKLOADS; do
    for setup in $SETUPS; do run "$workload" "$setup" >>"$WORK/results.txt"; done
  done
  echo "round $r done" >&2
done
median() { grep "^$1 $2 " "$WORK/results.txt" | sort -k3 -n | awk '{ q[NR] = $3 } END { print q[int((NR + 1) / 2)] }'; }
for workload in $WORKLOADS; do
  printf '\n%-7s %-9s %10s %16s %12s %13s\n' workload setup qps cpu-us/answer agent-cores dnsperf-cores
  for setup in $SETUPS; do
    grep "^$workload $setup " "$WORK/results.txt" | sort -k3 -n | awk '
      { q[NR] = $3; c[NR] = $4; a[NR] = $5; p[NR] = $6; w = $1; s = $2 }
      END { m = int((NR + 1) / 2); printf "%-7s %-9s %10d %16.2f %12.2f %13.2f\n", w, s, q[m], c[m], a[m], p[m] }'
  done
  if [[ " $SETUPS " == *" 1w-2cpu "* && " $SETUPS " == *" 2w-2cpu "* ]]; then
    awk -v w="$workload" -v a="$(median "$workload" 1w-2cpu)" -v b="$(median "$workload" 2w-2cpu)" \
      'BEGIN { printf "%s: 2 workers / 1 worker on the same two shared cores: %.2fx QPS\n", w, b / a }'
  fi
done
echo
echo "(qps: median of the rounds; the other columns are from the same median-QPS round. dnsperf and the agent"
echo " compete for the same $(nproc) cores in the -2cpu set-ups: with hits, dnsperf needs one of them.)"
