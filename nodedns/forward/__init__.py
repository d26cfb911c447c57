"""Forwarding what the cluster zone does not hold: upstream groups, policies, exchange, health, config sources; the
fallback upstream before the first sync; the forward cache (`store`: the forwarded answers, rendered into the
hot dict the resolver hands it).

May import: dns, metrics, runtime, config, names, errors. Never cluster or podconf (it knows no Kubernetes), never
serve (the resolver uses it, not the other way).
"""
