#!/usr/bin/env bash
# Benchmark nodedns's cluster zone with dnsperf (Debian package `dnsperf`).
#
# Serves a generated cluster (BENCH_SERVICES Services, default 300: ClusterIP dual-stack, headless,
# ExternalName) and queries a mix of A, AAAA and SRV with ~5% NXDOMAIN, once without EDNS and once
# with it (dnsperf -e). Method of docs/peers.md (part 2): server pinned to CPU 1,
# dnsperf to CPU 0, answers primed first; CPU per answer = the server's utime+stime over the run
# (/proc/PID/stat) divided by dnsperf's "Queries completed"; p99 from per-query latencies
# (dnsperf -v) at a fixed offered load of BENCH_LOAD (default 0.8) x the measured QPS.
#
#   scripts/bench-cluster.sh            # about 50 s
#   BENCH_SECONDS=5 scripts/bench-cluster.sh
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY=${PYTHON:-$([ -x "$ROOT/.venv/bin/python" ] && echo "$ROOT/.venv/bin/python" || echo python3)}  # the checkout's venv
SERVICES="${BENCH_SERVICES:-300}"
DURATION="${BENCH_SECONDS:-10}"
CLIENTS="${BENCH_CLIENTS:-10}"
LOAD="${BENCH_LOAD:-0.8}"

if ! command -v dnsperf >/dev/null; then
  echo "bench-cluster: dnsperf not found (apt-get install dnsperf)" >&2
  exit 2
fi
if [ "$(nproc)" -lt 2 ]; then
  echo "bench-cluster: needs 2 CPUs (server on CPU 1, dnsperf on CPU 0)" >&2
  exit 2
fi

WORK="$(mktemp -d)"
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

helper() { PYTHONPATH="$ROOT" "$PY" "$ROOT/scripts/bench_cluster.py" "$@"; }

helper manifest "$WORK/cluster.yaml" --services "$SERVICES"
helper queries "$WORK/queries.txt" --services "$SERVICES"
PORT="$(helper free-port)"

PYTHONPATH="$ROOT" taskset -c 1 "$PY" -m nodedns serve --manifests "$WORK/cluster.yaml" \
  --listen "127.0.0.1:$PORT" --status-listen none --log-level warning --workers 1 --upstream none 2>"$WORK/server.log" &
SERVER_PID=$!
if ! helper wait-ready "$PORT" --timeout 30; then
  echo "bench-cluster: nodedns did not get ready" >&2
  cat "$WORK/server.log" >&2
  exit 1
fi

perf() { taskset -c 0 dnsperf -s 127.0.0.1 -p "$PORT" -d "$WORK/queries.txt" "$@"; }

# prime: every answer built and stored once, with and without EDNS
perf -n 1 >/dev/null
perf -n 1 -e >/dev/null

echo "nodedns cluster zone: $SERVICES services, $(wc -l <"$WORK/queries.txt") query lines, ${DURATION}s per run,"
echo "dnsperf -c $CLIENTS on CPU 0, server on CPU 1; $(nproc) CPUs, $("$PY" --version 2>&1)"
printf '%-6s %10s %14s %10s %16s %8s\n' mode QPS "CPU/answer" lost "p99 @ fixed load" offered
for mode in plain edns; do
  flags=()
  [ "$mode" = edns ] && flags=(-e)
  before="$(helper cputime "$SERVER_PID")"
  perf -c "$CLIENTS" -l "$DURATION" "${flags[@]}" >"$WORK/$mode.txt"
  after="$(helper cputime "$SERVER_PID")"
  read -r completed qps < <(helper dnsperf "$WORK/$mode.txt")
  lost="$(sed -n 's/.*Queries lost: *\([0-9]*\).*/\1/p' "$WORK/$mode.txt")"
  cpu_us="$(awk -v d="$((after - before))" -v n="$completed" 'BEGIN { printf "%.1f us", d / n }')"
  rate="$(awk -v q="$qps" -v l="$LOAD" 'BEGIN { printf "%d", q * l }')"
  perf -c "$CLIENTS" -l "$DURATION" -Q "$rate" -v "${flags[@]}" >"$WORK/$mode-fixed.txt"
  p99="$(helper p99 "$WORK/$mode-fixed.txt")"
  printf '%-6s %10s %14s %10s %13s ms %8s\n' "$mode" "$qps" "$cpu_us" "$lost" "$p99" "$rate"
done
