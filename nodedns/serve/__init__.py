"""Answering: the UDP/TCP listeners, the hit path (Python, and its C mirror _hitpath.c), the resolver's rcode
decisions and the parts it holds (cluster answers, forwarding, ExternalName chases and autopath walks), the stored
answers, who gets answers (allow list, rate limit), the tally of who asked, local records from
hosts files.

May import: forward, podconf, cluster, dns, metrics, runtime, config, names, errors. Never node (the node's
plumbing) or observe.
"""
