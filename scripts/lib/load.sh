# Shared by the load scripts (restart-under-load, soak, bench-workers); sourced, not run.
#
#   NAME=soak; source "$(dirname "$0")/lib/load.sh"   # cd to the checkout, PY, PYTHONPATH, WORK, cleanup
#   require dnsperf taskset
#   track "$pid"                                   # killed (TERM, then KILL after 15 s) on exit
#   CLEANUP_EXTRA=(ip netns delete "$NS")          # run on exit too
#   perf_counts FILE                               # SENT LOST COMPLETED BAD from a dnsperf report
#   CLUSTER_QUERIES                                # dnsperf input: names of examples/cluster.yaml

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"  # `python -m nodedns` must find this checkout's package, whatever the caller's directory
export PYTHONSAFEPATH=1 PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-$([ -x "$ROOT/.venv/bin/python" ] && echo "$ROOT/.venv/bin/python" || echo python3)}  # the checkout's venv
WORK=$(mktemp -d "/tmp/nodedns-$NAME.XXXXXX")
PIDS=()
CLEANUP_EXTRA=()

require() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null || { echo "$NAME: $tool is not installed" >&2; exit 2; }
  done
}

track() { PIDS+=("$1"); }

wait_gone() {  # wait_gone PID SECONDS: until the process has exited (false when it did not)
  timeout "$2" tail --pid="$1" -f /dev/null 2>/dev/null
}

cleanup() {
  local pid
  for pid in "${PIDS[@]:-}"; do [ -n "$pid" ] && kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]:-}"; do
    [ -n "$pid" ] && { wait_gone "$pid" 15 || kill -9 "$pid" 2>/dev/null || true; }
  done
  [ "${#CLEANUP_EXTRA[@]}" = 0 ] || "${CLEANUP_EXTRA[@]}" 2>/dev/null || true
  [ -n "${KEEP_WORK:-}" ] && echo "$NAME: kept $WORK" >&2 || rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

perf_counts() {  # perf_counts FILE -> "SENT LOST COMPLETED BAD" (BAD: answers neither NOERROR nor NXDOMAIN)
  awk '/Queries sent:/ { s = $3 } /Queries lost:/ { l = $3 } /Queries completed:/ { c = $3 }
       /Response codes:/ { for (i = 3; i <= NF; i += 3) if ($i == "NOERROR" || $i == "NXDOMAIN") ok += $(i + 1) }
       END { printf "%d %d %d %d\n", s, l, c, c - ok }' "$1"
}

CLUSTER_QUERIES='web.default.svc.cluster.local A
web.default.svc.cluster.local AAAA
api.prod.svc.cluster.local A
_http._tcp.web.default.svc.cluster.local SRV
db.prod.svc.cluster.local A
kube-dns.kube-system.svc.cluster.local A
queue.prod.svc.cluster.local A
nope.default.svc.cluster.local A
34.12.96.10.in-addr.arpa PTR
web.otherns.svc.cluster.local A'
