"""`--workers N`: the modes an agent runs in, each wired from its parts (`nodedns shadow`'s: nodedns.shadow).

`launch` is the entry (one agent or a supervisor); `modes` builds each mode's agent from its parts
(the one wiring layer: one process, supervisor, worker); `supervisor` (the worker processes,
the supervisor's listeners; `fleetstatus`: its /status and /metrics, its workers' counters summed) and
`worker` (a worker's side of its supervisor, its index source) are the two ends, neither importing
the other; they speak `messages` (typed, one dispatch table per side) over `channel`, and `pushed` is
the derived data a worker decides from; `zygote` forks the workers. May import everything below it:
the app (the agent and its parts' contracts) and every package but cli and shadow.
"""
