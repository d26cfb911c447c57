"""A Pod's DNS configuration: its resolv.conf as the kubelet renders it, its search path and node-local autopath's
plan, and the node's resolv.conf they are rendered from.

May import: cluster, dns, metrics, runtime, config, names, errors.
"""
