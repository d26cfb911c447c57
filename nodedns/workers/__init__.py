"""`--workers N`: the supervisor and the worker processes, and the zygote they are forked from.

`fleet` is the entry (one agent or a supervisor); `supervisor` and `worker` are the two ends, neither
importing the other; they speak `messages` (typed, one dispatch table per side) over `channel`, and
`pushed` is the derived data a worker decides from. May import everything below it: the app (the
wiring) and every package but cli.
"""
