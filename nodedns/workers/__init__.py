"""`--workers N`: the supervisor and the worker processes, and the zygote they are forked from.

May import everything below it: the app (the wiring) and every package but cli.
"""
