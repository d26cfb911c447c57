"""The dependency tags of the stored answers, and which tags an index change touches (`change_tags`).

Every answer says what it was built from (`Answer.deps`, and the second value of
`ClusterRecords.resolve`): a tag per thing of the index it read, recorded by the accessors of
`zone.ZoneReader` as the lookup goes, so no path can forget one. `change_tags(kind, old, new)` names
the tags an index change touches, from the old and the new record; an answer stays valid until one
of its tags is named.

    n:<ns>            namespace <ns> exists                    a Namespace
    s:<ns>/<name>     Service <ns>/<name> and its slices       that Service; a slice of it (old or new)
    i:<ip>            what has <ip>: ClusterIPs, endpoints,    a Service or slice with <ip> (old or new);
                      clusterset IPs, imported endpoints       a ServiceImport or imported slice with it
    p:<ip>            the Pods with <ip> (--pods verified)     a Pod with <ip> (old or new)
    o:<node>          Node <node> (topology, federation)       that Node
    m:<ns>/<name>     ServiceImport <ns>/<name> and the        that ServiceImport; a slice imported
                      slices imported for it                   for it (old or new)
    z                 the SOA serial                           every change
    a:<ns>            (the resolver's) autopath may walk here  a Pod in <ns> (old or new)
"""

from __future__ import annotations

from typing import Any

from nodedns.cluster import objects as k8s

SERIAL = "z"


def change_tags(kind: str, old: Any, new: Any) -> frozenset[str] | None:
    """The dependency tags an index change touches (from its old and new record); None: everything
    (the first sync, an unknown kind)."""
    if kind in k8s.POLICY_KINDS:
        return frozenset()  # no record of any zone: a policy decides before the stored answers (nodedns.policy)
    tags = {SERIAL}
    if kind == k8s.ENDPOINTSLICE and old is not None and new is not None and old.same_addresses(new):
        # the same addresses of the same Service (readiness, names or ports changed): the Service's answers,
        # and the reverse answers of the addresses whose endpoint changed — not of every address of the slice
        tags.add(f"s:{new.namespace}/{new.service}")
        tags.update(f"i:{ip}" for ip in new.changed_address_texts(old))
        return frozenset(tags)
    for record in (old, new):
        if record is None:
            continue
        if kind == k8s.SERVICE:
            tags.add(f"s:{record.namespace}/{record.name}")
            tags.update(f"i:{ip}" for ip in record.cluster_ips)
        elif kind == k8s.ENDPOINTSLICE:
            tags.add(f"s:{record.namespace}/{record.service}")
            tags.update(f"i:{ip}" for ip in record.address_texts())
        elif kind == k8s.POD:
            tags.update(f"p:{ip}" for ip in record.ips)
            tags.add(f"a:{record.namespace}")
        elif kind == k8s.NAMESPACE:
            tags.add(f"n:{record.name}")
        elif kind == k8s.NODE:
            tags.add(f"o:{record.name}")
        elif kind == k8s.SERVICE_IMPORT:
            tags.add(f"m:{record.namespace}/{record.name}")
            tags.update(f"i:{ip}" for ip in record.ips)
        elif kind == k8s.IMPORTED_SLICE:
            tags.add(f"m:{record.namespace}/{record.service}")
            tags.update(f"i:{ip}" for ep in record.slice.endpoints for ip in ep.addresses)
        else:
            return None
    if kind == "":
        return None
    return frozenset(tags)
