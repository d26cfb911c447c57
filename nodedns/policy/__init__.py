"""DNS policy (nodedns.io DNSPolicy and ClusterDNSPolicy): what a Pod of this node may resolve.

`model` reads a policy's spec into rules (what it cannot use is reported, the rest applies) and
decides for one question; `book` picks the Pods each policy applies to from the index (their labels
and their namespace's) and keeps, by client address, the policies that apply. It imports `cluster/`
(the index, the slim records), `dns/` (the codes, the wire), `names` and `errors`; the answering
(`serve/`) and the explainer (`observe/`) import it.
"""
