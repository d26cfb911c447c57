#!/usr/bin/env bash
# Restarts under load: dnsperf keeps querying the node-local IP while nodedns is restarted, and the
# script prints how many queries each restart lost (target: 0).
#
#   sudo scripts/restart-under-load.sh             # RATE=20000 RESTARTS=3 ROUND=15 WORKERS=0 FIREWALL=iptables
#   sudo RATE=5000 RESTARTS=1 ROUND=8 scripts/restart-under-load.sh
#
# In a network namespace of its own (nd9b-restart-*, so it can own 169.254.20.10), the agent runs
# as in the DaemonSet: --setup-interface nd9b-local --local-ip 169.254.20.10 --firewall $FIREWALL,
# serving the example cluster (--manifests examples/cluster.yaml), --workers $WORKERS (0: one per
# CPU). Each restart is one round of ROUND seconds of dnsperf at RATE queries per second (32
# client sockets, 2 s timeout) on a mix of cluster names (A, AAAA, SRV, PTR, NXDOMAIN); one second
# in, a new agent starts beside the old one, the script waits until the status port (shared, as in
# the DaemonSet) answers ready from the new process (/status: ready, handover.pid), then
# SIGTERMs the old one (lameduck $LAMEDUCK) and waits for it to exit, all inside the round. Rounds
# follow each other back to back (dnsperf restarts between them: a few milliseconds without
# queries, never during a restart). Printed per restart and in total: queries sent, lost
# (no answer within 2 s), answers that were not NOERROR/NXDOMAIN; plus how long the new agent
# took to get ready and the old one to go, and the interface and rule count after each restart.
# Needs root, iproute2, dnsperf (and iptables or nft for FIREWALL). Everything it starts is stopped
# and the namespace deleted on exit.
set -euo pipefail

RATE=${RATE:-20000}
RESTARTS=${RESTARTS:-3}
ROUND=${ROUND:-15}
WORKERS=${WORKERS:-0}
FIREWALL=${FIREWALL:-iptables}
LAMEDUCK=${LAMEDUCK:-2s}
LOCAL_IP=169.254.20.10
IFACE=nd9b-local
NAME=restart-under-load
source "$(dirname "$0")/lib.sh"
require ip dnsperf
[ "$(id -u)" = 0 ] || { echo "restart-under-load: needs root (network namespace)" >&2; exit 2; }

NS=nd9b-restart-$$
CLEANUP_EXTRA=(ip netns delete "$NS")
ip netns add "$NS"
ip netns exec "$NS" ip link set lo up
in_ns() { ip netns exec "$NS" "$@"; }
echo "$CLUSTER_QUERIES" >"$WORK/queries.txt"

STATUS=127.0.0.1:9253  # every generation on the same status and debug ports, as in the DaemonSet
DEBUG=127.0.0.1:9254

start_agent() {  # start_agent GEN -> the agent's pid in AGENT_PID (ip netns exec execs: the same pid)
  local gen=$1
  ip netns exec "$NS" "$PY" -m nodedns serve --manifests examples/cluster.yaml --setup-interface "$IFACE" \
    --local-ip "$LOCAL_IP" --firewall "$FIREWALL" --workers "$WORKERS" --lameduck "$LAMEDUCK" \
    --status-listen "$STATUS" --debug-listen "$DEBUG" --lock-dir "$WORK/locks" --upstream none >"$WORK/agent-$gen.log" 2>&1 &
  AGENT_PID=$!
  track "$AGENT_PID"
}

wait_ready() {  # wait_ready GEN PID: until /status, answered by that very process, says ready (60 s at most)
  local gen=$1 pid=$2
  for _ in $(seq 600); do
    kill -0 "$pid" 2>/dev/null || { echo "restart-under-load: agent $gen died:" >&2; cat "$WORK/agent-$gen.log" >&2; exit 1; }
    if in_ns "$PY" -c "import json, sys, urllib.request
d = json.load(urllib.request.urlopen('http://$DEBUG/status', timeout=1))
sys.exit(not (d['ready'] and d['handover']['pid'] == $pid))" 2>/dev/null; then
      return 0
    fi
    sleep 0.1
  done
  echo "restart-under-load: agent $gen not ready in 60 s" >&2; cat "$WORK/agent-$gen.log" >&2; exit 1
}

rules() {  # our conntrack-bypass rules in the namespace
  if [ "$FIREWALL" = iptables ]; then
    in_ns iptables-save 2>/dev/null | grep -c 'nodedns:' || true
  elif [ "$FIREWALL" = nftables ]; then
    in_ns nft list table inet nodedns 2>/dev/null | grep -c 'comment "nodedns:' || true
  else
    echo 0
  fi
}

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

gen=0
start_agent $gen
OLD_PID=$AGENT_PID
wait_ready $gen "$OLD_PID"
echo "agent 0 ready (pid $OLD_PID, workers: ${WORKERS/#0/one per CPU}); interface $IFACE, $(rules) $FIREWALL rules"
echo "load: dnsperf at $RATE qps, rounds of ${ROUND}s, one restart per round"

TOTAL_SENT=0 TOTAL_LOST=0 TOTAL_BAD=0
for r in $(seq 1 "$RESTARTS"); do
  ip netns exec "$NS" dnsperf -s "$LOCAL_IP" -d "$WORK/queries.txt" -Q "$RATE" -l "$ROUND" -c 32 -q 2000 -t 2 \
    >"$WORK/dnsperf-$r.txt" 2>&1 &
  PERF=$!
  track "$PERF"
  sleep 1
  gen=$((gen + 1))
  t0=$(now)
  start_agent $gen
  NEW_PID=$AGENT_PID
  wait_ready $gen "$NEW_PID"
  ready_after=$(since "$t0")
  t1=$(now)
  kill -TERM "$OLD_PID"
  wait_gone "$OLD_PID" 60 || { echo "restart-under-load: old agent did not exit" >&2; exit 1; }
  gone_after=$(since "$t1")
  covered=yes
  kill -0 "$PERF" 2>/dev/null || covered="NO (the round ended before the old agent exited: raise ROUND)"
  wait "$PERF" || true
  read -r sent lost _ bad < <(perf_counts "$WORK/dnsperf-$r.txt")
  echo "restart $r: sent $sent lost $lost bad-rcode $bad | new agent (pid $NEW_PID) ready after ${ready_after}s," \
       "old (pid $OLD_PID) gone ${gone_after}s after SIGTERM, within the load: $covered | interface" \
       "$(in_ns ip -br link show "$IFACE" >/dev/null 2>&1 && echo present || echo MISSING), $(rules) rules"
  TOTAL_SENT=$((TOTAL_SENT + sent)) TOTAL_LOST=$((TOTAL_LOST + lost)) TOTAL_BAD=$((TOTAL_BAD + bad))
  OLD_PID=$NEW_PID
done
echo "total: $RESTARTS restarts, sent $TOTAL_SENT lost $TOTAL_LOST bad-rcode $TOTAL_BAD"

kill -TERM "$OLD_PID"
wait_gone "$OLD_PID" 60 || true
echo "last agent stopped: interface $(in_ns ip -br link show "$IFACE" >/dev/null 2>&1 && echo LEFT BEHIND || echo removed)," \
     "$(rules) rules left"
