#!/usr/bin/env bash
# The agent killed or hung under load: how long the node's Pods go without DNS, and that the agent's
# answers come back (the guard's fallback to the cluster DNS through kube-proxy, end to end).
#
#   sudo scripts/failover.sh                          # FIREWALL=iptables MODES=kill,stop RATE=2000 OUTAGE=5
#   sudo FIREWALL=nftables MODES=stop scripts/failover.sh
#
# A fake node in network namespaces (ndfs-*): a "pod" resolving through the kube-dns ClusterIP under
# dnsperf load plus a meter (a query every 10 ms), a stand-in cluster DNS (dnsmasq) behind kube-proxy's
# DNAT, and on the node `nodedns serve` + `nodedns guard` as the DaemonSet runs them. Per mode, one line:
# the window of unanswered queries (limit 3 s), when the cluster DNS took over, when the agent answered
# again. Details in scripts/failover.py. Needs root, iproute2, iptables or nft, dnsperf, dnsmasq.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
export PYTHONSAFEPATH=1 PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-$([ -x "$ROOT/.venv/bin/python" ] && echo "$ROOT/.venv/bin/python" || echo python3)}  # the checkout's venv
for tool in ip dnsperf dnsmasq; do
  command -v "$tool" >/dev/null || { echo "failover: $tool is not installed" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "failover: needs root (network namespaces)" >&2; exit 2; }
args=(--firewall "${FIREWALL:-iptables}" --modes "${MODES:-kill,stop}" --rate "${RATE:-2000}" --outage "${OUTAGE:-5}")
[ -n "${WORKERS:-}" ] && args+=(--workers "$WORKERS")
exec "$PY" scripts/failover.py "${args[@]}"
