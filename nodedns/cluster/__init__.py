"""The cluster as DNS sees it: Kubernetes objects slimmed, the index of them, its sync (the API's list+watch, a
manifest dump), each change of it handed on with its tags named once (changes), the cluster-zone and
reverse records, what exists (for workers), topology order.

May import: dns, metrics, runtime, config, names, errors. Never forward, serve, node, observe, workers, app.
"""
