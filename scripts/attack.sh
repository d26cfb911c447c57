#!/usr/bin/env bash
# A hostile tenant against the agent as shipped: per flood, the memory it costs the node, the queries a good
# Pod loses meanwhile, the workers it kills; PASS or FAIL against the targets (<= 64 MB, nothing lost).
#
#   flock /tmp/nodedns-bench.lock scripts/attack.sh                 # every flood at full size (a few minutes)
#   scripts/attack.sh --quick                                       # small floods, short holds (CI)
#   scripts/attack.sh --attacks pipeline-60k,stop-worker
#   scripts/attack.sh --attacks srv-64k,spray,namespace-share,spoof   # the tenant's: answers, misses, Pods, spoofing
#   scripts/attack.sh --attacks never-read --sources 20               # the attacker on 20 addresses (Pods)
#   scripts/attack.sh --set tcp-max-connections=1000                  # a ConfigMap key changed (what-if)
#   sudo NETNS=1 scripts/attack.sh                                  # and a worker stopped on a fake node
#
# The floods (TCP pipelining without reading, connections that never read, a stopped worker, an ExternalName
# with a 64-byte label, 60 KB forwarded answers, a Service of 64 KB SRV answers, a spray of random names,
# 20 Pods of one namespace, queries in the good Pod's name) run on 127.0.0.1 against `nodedns serve` with
# daemonset/configmap.yaml's config (--workers 2, the allow list); details in scripts/attack.py. With NETNS=1
# (root), scripts/failover.py's stop-worker scenario follows: the node in network namespaces with its
# interface, iptables rules and the guard, a worker stopped under load.
set -euo pipefail
NAME=attack
source "$(dirname "$0")/lib.sh"
"$PY" scripts/attack.py "$@"
if [ -n "${NETNS:-}" ]; then
  [ "$(id -u)" = 0 ] || { echo "attack: NETNS=1 needs root (network namespaces)" >&2; exit 2; }
  "$PY" scripts/failover.py --modes stop-worker --rate 1000 --outage 6
fi
