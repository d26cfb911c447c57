"""The node side: the link-local interface (netlink), the conntrack-bypass firewall rules, the hand-over between an
agent and its successor, and `nodedns guard`.

May import: runtime, config, names, errors. Never serve, cluster, forward (and the guard stays small: see
pyproject.toml's forbidden contract).
"""
