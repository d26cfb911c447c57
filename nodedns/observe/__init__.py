"""The agent's view of itself: liveness and readiness, the /status document, the HTTP listeners (aiohttp), the status
page and its history, per-Pod insight, the lookup explainer.

May import: serve, forward, node, podconf, cluster, dns, metrics, runtime, config, names, errors.
"""
