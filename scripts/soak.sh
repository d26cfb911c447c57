#!/usr/bin/env bash
# Soak: nodedns under steady load and a steady stream of EndpointSlice changes; memory must stay flat
# and nothing may fail.
#
#   scripts/soak.sh                                  # DURATION=600 WARMUP=30 MAX_SECONDS=5 UPDATES=10
#   DURATION=20 WARMUP=5 SAMPLE=5 scripts/soak.sh    # a smoke run (CI)
#
# The cluster is the API server double (tests/support/apiserver.py via scripts/soak_feeder.py: 200 Services in
# 4 namespaces, half headless, an EndpointSlice of 5 endpoints each), changing UPDATES EndpointSlices a
# second for the whole run. The agent watches it (`nodedns serve --kubeconfig`, --workers $WORKERS,
# 0 = one per CPU) on 127.0.0.1. First the maximum is measured briefly (dnsperf unthrottled for
# MAX_SECONDS, 32 sockets, the updates running), then the load is half of it: WARMUP seconds, then
# RSS (the supervisor's plus every worker's VmRSS) is taken, DURATION seconds of load with RSS printed
# every SAMPLE seconds, RSS again. Printed at the end: RSS at start and end and the growth, queries
# sent, lost (no answer within 2 s) and answered with anything but NOERROR/NXDOMAIN, EndpointSlice
# updates made and seen by the agent, the agent's error log lines; PASS when the growth is under 5%
# and there are no errors at all, else FAIL (exit status 1).
# Needs: dnsperf. Every process it starts is stopped on exit. The machine's other load counts: the
# agent, dnsperf and the feeder share its CPUs.
set -euo pipefail

DURATION=${DURATION:-600}
WARMUP=${WARMUP:-30}
MAX_SECONDS=${MAX_SECONDS:-5}
UPDATES=${UPDATES:-10}
WORKERS=${WORKERS:-0}
SAMPLE=${SAMPLE:-60}
NAME=soak
source "$(dirname "$0")/lib.sh"
require dnsperf

read -r PORT SPORT DPORT < <("$PY" -c "from tests.support.helpers import free_port; print(free_port(), free_port(), free_port())")

"$PY" scripts/soak_feeder.py "$WORK" --rate "$UPDATES" >"$WORK/feeder.log" 2>&1 &
FEEDER=$!
track "$FEEDER"
for _ in $(seq 300); do grep -q '^ready' "$WORK/feeder.log" && break; sleep 0.1; done
grep -q '^ready' "$WORK/feeder.log" || { echo "soak: the feeder did not start:" >&2; cat "$WORK/feeder.log" >&2; exit 1; }

"$PY" -m nodedns serve --kubeconfig "$WORK/kubeconfig" --listen "127.0.0.1:$PORT" --status-listen "127.0.0.1:$SPORT" \
  --debug-listen "127.0.0.1:$DPORT" --workers "$WORKERS" --node-name soak-node --lameduck 0s --upstream none \
  >"$WORK/agent.log" 2>&1 &
AGENT=$!
track "$AGENT"

status() {  # status EXPR: a value from the agent's /status (Python expression over `d`)
  "$PY" -c "import json, urllib.request
d = json.load(urllib.request.urlopen('http://127.0.0.1:$DPORT/status', timeout=5))
print($1)"
}
for _ in $(seq 300); do
  kill -0 "$AGENT" 2>/dev/null || { echo "soak: the agent died:" >&2; cat "$WORK/agent.log" >&2; exit 1; }
  [ "$(status "d['ready']" 2>/dev/null || true)" = True ] && break
  sleep 0.1
done
[ "$(status "d['ready']")" = True ] || { echo "soak: the agent is not ready:" >&2; cat "$WORK/agent.log" >&2; exit 1; }

rss_kib() {  # the supervisor's and every worker's VmRSS, summed (KiB)
  local total=0 pid
  for pid in $AGENT $(status "' '.join(str(w['pid']) for w in (d.get('workers') or {}).get('workers', []) if w['up'])"); do
    total=$((total + $(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")))
  done
  echo "$total"
}
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
perf() {  # perf SECONDS [dnsperf flags...] -> output in $WORK/perf.txt
  local seconds=$1; shift
  dnsperf -s 127.0.0.1 -p "$PORT" -d "$WORK/queries.txt" -l "$seconds" -c 32 -t 2 "$@" >"$WORK/perf.txt" 2>&1
}

workers=$(status "(d.get('workers') or {}).get('configured', 1)")
perf "$MAX_SECONDS" -q 500
MAX=$(awk '/Queries per second:/ {printf "%d", $4}' "$WORK/perf.txt")
TARGET=$((MAX / 2))
echo "agent: $workers worker(s), $(status "d['index']['counts']['services']") services; $UPDATES EndpointSlice updates/s"
echo "maximum: $MAX qps (${MAX_SECONDS}s unthrottled, updates running); soak load: $TARGET qps"
perf "$WARMUP" -Q "$TARGET" -q 2000
RSS_START=$(rss_kib)
EVENTS_START=$(status "d['sync']['resources']['endpointslices']['events']")
echo "after ${WARMUP}s warm-up: RSS $(mib "$RSS_START") MiB"

perf "$DURATION" -Q "$TARGET" -q 2000 &
PERF=$!
track "$PERF"
t=0
while kill -0 "$PERF" 2>/dev/null; do
  sleep 1
  t=$((t + 1))
  if [ $((t % SAMPLE)) = 0 ] && kill -0 "$PERF" 2>/dev/null; then
    echo "  t=${t}s RSS $(mib "$(rss_kib)") MiB"
  fi
done
wait "$PERF" || true
RSS_END=$(rss_kib)
EVENTS=$(( $(status "d['sync']['resources']['endpointslices']['events']") - EVENTS_START ))
read -r sent lost _ bad < <(perf_counts "$WORK/perf.txt")
breakdown=$(for pid in $AGENT $(status "' '.join(str(w['pid']) for w in d['workers']['workers'] if w['up'])" \
  2>/dev/null); do awk '/^VmRSS:/ {printf "%.1f ", $2 / 1024}' "/proc/$pid/status"; done)
kill -TERM "$AGENT"  # before the API server goes: a clean stop, no watch errors
wait_gone "$AGENT" 30 || true
wait "$AGENT" && agent_exit=0 || agent_exit=$?
kill -TERM "$FEEDER"
wait_gone "$FEEDER" 15 || true
made=$(awk '/^updates/ {print $2}' "$WORK/feeder.log")
error_lines=$(grep -c -E ' (ERROR|CRITICAL) |Traceback' "$WORK/agent.log" || true)
[ "$agent_exit" = 0 ] || error_lines=$((error_lines + 1))
growth=$(awk -v a="$RSS_START" -v b="$RSS_END" 'BEGIN { printf "%.2f", (b - a) * 100 / a }')
errors=$((lost + bad + error_lines))

echo "RSS: start $(mib "$RSS_START") MiB, end $(mib "$RSS_END") MiB, growth ${growth}% (per process at the end," \
     "supervisor first: ${breakdown% } MiB)"
echo "queries: sent $sent, lost $lost, bad-rcode $bad, $(awk '/Average Latency/ {print "avg latency", $4 * 1000, "ms"}' \
  "$WORK/perf.txt")"
echo "EndpointSlice updates: ${made:-?} made (whole run), $EVENTS applied during the ${DURATION}s"
echo "agent error log lines: $error_lines (exit status $agent_exit after SIGTERM)"
if awk -v g="$growth" 'BEGIN { exit !(g < 5) }' && [ "$errors" = 0 ]; then
  echo "PASS: RSS growth ${growth}% < 5%, 0 errors"
else
  echo "FAIL: RSS growth ${growth}% (target < 5%), $errors errors (target 0)"
  [ "$error_lines" = 0 ] || grep -E ' (ERROR|CRITICAL) |Traceback' "$WORK/agent.log" | head -5
  exit 1
fi
