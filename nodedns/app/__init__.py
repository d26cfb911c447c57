"""The agent, built from parts: the lifecycle (start in order, stop in reverse) and the parts a mode chooses.

Owns `agent` (the lifecycle: start in order, stop in reverse, readiness), `httplisteners` (the status
and debug listeners), `succession` (the hand-over between two agents of a node), `filteraaaa`
(--filter-aaaa auto), `policies` (the DNS policy book kept up to date), `upstreams` (the forwarding at
run time), `poddns` (what the Pods here get their resolv.conf from), `parts` (the contract of each part a
mode chooses, and the one process's own parts), `sections` (the limits and the answers in /status and
/metrics), `loops` (the forwarding-loop probes), `build` (the Config read into each part's settings and
the parts built from it) and `run` (one agent on uvloop, its exit code). Which parts each mode holds is
chosen in nodedns.workers.modes. May import every package below it (observe, serve, forward, node,
podconf, cluster, dns, metrics, runtime) and the shared modules; never nodedns.workers or nodedns.cli.
"""
