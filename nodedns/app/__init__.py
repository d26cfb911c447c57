"""The agent, built from parts: the lifecycle (start in order, stop in reverse) and the parts a mode chooses.

Owns `agent` (the lifecycle: roster, node, listeners, sync, readiness, hand-over, the stop), `parts` (the
contract of each part a mode chooses, and the one process's own parts), `reports` (the limits and the
answers in /status and /metrics), `build` (the Config read into each part's settings) and `run`
(one agent on uvloop, its exit code). Which parts each mode holds is chosen in nodedns.workers.modes.
May import every package below it (observe, serve, forward, node, podconf, cluster, dns, metrics,
runtime) and the shared modules; never nodedns.workers or nodedns.cli.
"""
