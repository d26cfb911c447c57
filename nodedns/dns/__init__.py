"""The DNS wire format (parse, key, pack, truncate; dnslib for the rest) and the server's identity (CH, NSID).

Pure. May import: config, names, errors (the top's shared modules) and nothing else of nodedns.
"""
