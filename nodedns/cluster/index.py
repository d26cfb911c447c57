"""The in-memory index of cluster objects, keyed the way DNS queries look them up (pure, no I/O).

Sources (the manifest loader, the API watch) feed it single objects: `apply(kind, event, obj)`
with raw dicts, or `upsert`/`delete` with slim records. Every effective change bumps `generation`
and calls the `on_record` listeners with (kind, old record, new record) (None for "absent"; a
Namespace is `Namespace(name)`; `mark_synced` calls them with kind "" and no records: everything may
have changed). In the agent the one `on_record` listener
is `changes.Changes`, which names the change's dependency tags once (`records.change_tags`) and hands
it to every listener the wiring added (app.agent.Agent._wire_changes, workers.modes, shadow.agent). An
identical object re-sent (resync, relist) changes nothing.

The lookup tables hold no copies. IP -> owners maps an address to the one key of its owner (a list
only when several objects share it). Endpoint addresses, 150,000 at 5,000 nodes, are not keyed one
by one: each block of 256 addresses (`objects.ip_key >> 8`, a node's pod range is one or a few)
names the slices with an address in it, and a lookup asks those slices (`has_address`: a search
of their packed addresses). A Service's slices are a sorted tuple of names.

Multi-Cluster Services (with --multicluster-zone): ServiceImports by name and the imported
EndpointSlices by ServiceImport, in tables of their own, each with its reverse table (clusterset IP
-> ServiceImports, address block -> imported slices, as for the cluster's own objects) for the
clusterset PTR records.

A relist goes through `begin_relist(kind)` ... `upsert` ... `end_relist(kind)`: each listed object
replaces its old record in place and is marked seen; at the end the unseen ones are deleted. The old
and new state are never held side by side.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nodedns.cluster import objects as k8s
from nodedns.cluster.objects import (
    Endpoint,
    EndpointSlice,
    ImportedSlice,
    Namespace,
    Node,
    Pod,
    Policy,
    Record,
    Service,
    ServiceImport,
    packed_ip,
)
from nodedns.errors import ObjectError

log = logging.getLogger("nodedns.index")

Key = tuple[str, str]
ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"


@dataclass(frozen=True, slots=True)
class SlimChange:
    """What a source says of one object, slimmed: its new state, `record` None when it goes away.

    Built from a raw object by `change_of` (pure, so the API watch thread can do it), applied on
    the event loop with `Index.apply_change`; what it changed in the index, if anything, reaches the
    listeners as a `changes.Change` (with the old record).
    """

    kind: str
    namespace: str
    name: str
    record: Record | None


def change_of(kind: str, event: str, obj: Mapping[str, Any]) -> SlimChange:
    """The change a watch-style event with a raw object makes; raises ObjectError when it is invalid.

    DELETED, and objects DNS ignores (FQDN slices), become deletions, so no older version lingers.
    """
    if event == DELETED:
        ns, name = k8s.key_of(kind, obj)
        return SlimChange(kind, ns, name, None)
    record = k8s.slim(kind, obj)
    if record is None:
        ns, name = k8s.key_of(kind, obj)
        return SlimChange(kind, ns, name, None)
    ns = getattr(record, "namespace", "")
    return SlimChange(kind, ns, record.name, record)


Refs = Key | list[Key]  # the owner of an IP, or its owners when several share it (rare)
BLOCK_BITS = 8  # endpoint addresses are indexed by blocks of 2**8


def _blocks(sl: EndpointSlice) -> dict[int, None]:
    """The address blocks of a slice's endpoints, each once, in the order of the addresses."""
    return dict.fromkeys(k >> BLOCK_BITS for k in sl.ip_keys())


def _block_of(packed: bytes) -> int:
    """The address block (`objects.ip_key >> BLOCK_BITS`) of a packed address."""
    return (int.from_bytes(packed) | (k8s.V6_KEY if len(packed) == 16 else 0)) >> BLOCK_BITS


def _add_ref(table: dict[Any, Refs], ip: object, key: Key) -> None:
    refs = table.get(ip)
    if refs is None:
        table[ip] = key
    elif type(refs) is list:
        if key not in refs:
            refs.append(key)
    elif refs != key:
        table[ip] = [refs, key]  # type: ignore[list-item]


def _drop_ref(table: dict[Any, Refs], ip: object, key: Key) -> None:
    refs = table.get(ip)
    if refs is None:
        return
    if type(refs) is list:
        if key in refs:
            refs.remove(key)
            if len(refs) == 1:
                table[ip] = refs[0]
    elif refs == key:
        del table[ip]


def _refs(table: dict[Any, Refs], ip: object) -> Iterable[Key]:
    refs = table.get(ip)
    if refs is None:
        return ()
    return refs if type(refs) is list else (refs,)  # type: ignore[return-value]


class Index:
    """Namespaces, Services, EndpointSlices, Pods and Nodes, with lookup tables for DNS."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self.generation = 0
        self.last_change = clock()  # wall time of the last effective change (SOA serial)
        self.synced = False
        self.namespaces: set[str] = set()
        self.namespace_labels: dict[str, k8s.Labels] = {}  # only namespaces with labels (`Namespace.labels`)
        # DNS policies (nodedns.io): (kind, namespace, name) -> the record; `nodedns.policy` reads them
        self.policies: dict[tuple[str, str, str], Policy] = {}
        self.services: dict[Key, Service] = {}
        self.slices: dict[Key, EndpointSlice] = {}
        self.pods: dict[Key, Pod] = {}
        self.nodes: dict[str, Node] = {}
        self._slices_by_service: dict[Key, tuple[str, ...]] = {}  # sorted slice names
        self._services_by_ip: dict[str, Refs] = {}
        self._slices_by_block: dict[int, Refs] = {}  # objects.ip_key >> BLOCK_BITS -> slices
        self._pods_by_ip: dict[str, Refs] = {}
        self._pods_by_node: dict[str, set[Key]] = {}
        self._record_listeners: list[Callable[[str, Record | None, Record | None], None]] = []
        self._relist_seen: dict[str, set[Key]] = {}
        self.skipped = 0  # invalid objects skipped so far
        # Services kept whose spec.externalName cannot be a DNS name: (ns, name) -> the reason (logged once)
        self.unusable: dict[Key, str] = {}
        # Multi-Cluster Services: ServiceImports, and the EndpointSlices imported for them
        self.service_imports: dict[Key, ServiceImport] = {}
        self.imported_slices: dict[Key, ImportedSlice] = {}
        self._imported_by_service: dict[Key, set[str]] = {}
        self._imports_by_ip: dict[str, Refs] = {}  # clusterset IP -> ServiceImports
        self._imported_by_block: dict[int, Refs] = {}  # address block -> imported slices

    # -- change notification ---------------------------------------------------------------

    def on_record(self, listener: Callable[[str, Record | None, Record | None], None]) -> None:
        """Call `listener(kind, old, new)` on each effective change (kind "": everything may differ)."""
        self._record_listeners.append(listener)

    def _changed(self, kind: str = "", old: Record | None = None, new: Record | None = None) -> None:
        self.generation += 1
        self.last_change = self._clock()
        for record_listener in self._record_listeners:
            record_listener(kind, old, new)

    def mark_synced(self) -> None:
        if not self.synced:
            self.synced = True
            self._changed()  # answers built before the sync (SERVFAIL) must not be served any more

    # -- raw objects -----------------------------------------------------------------------

    def apply(self, kind: str, event: str, obj: Mapping[str, Any]) -> bool:
        """Apply one watch-style event with a raw object. False when the object was invalid."""
        try:
            change = change_of(kind, event, obj)
        except ObjectError as exc:
            self.skipped += 1
            log.warning("skipping invalid object: %s", exc)
            return False
        self.apply_change(change)
        return True

    def apply_change(self, change: SlimChange) -> None:
        """Apply one slim change (from `change_of`)."""
        if change.record is None:
            self.delete(change.kind, change.namespace, change.name)
        else:
            self.upsert(change.record)

    def load_changes(self, items: Iterable[SlimChange | ObjectError]) -> int:
        """Apply slim changes made ahead (`change_of`, e.g. in a thread while a file is read), an ObjectError
        counted and logged as skipped; returns how many were loaded."""
        loaded = 0
        for item in items:
            if isinstance(item, ObjectError):
                self.skipped += 1
                log.warning("skipping invalid object: %s", item)
                continue
            self.apply_change(item)
            loaded += 1
        return loaded

    def load(self, items: Iterable[tuple[str, Mapping[str, Any]]]) -> int:
        """Apply (kind, raw object) pairs as ADDED events; returns how many were loaded."""
        loaded = 0
        for kind, obj in items:
            if self.apply(kind, ADDED, obj):
                loaded += 1
        return loaded

    # -- slim records ----------------------------------------------------------------------

    def upsert(self, record: Record) -> None:
        if isinstance(record, Service):
            self._upsert_service(record)
        elif isinstance(record, EndpointSlice):
            self._upsert_slice(record)
        elif isinstance(record, Pod):
            self._upsert_pod(record)
        elif isinstance(record, Namespace):
            self._mark(k8s.NAMESPACE, ("", record.name))
            known = record.name in self.namespaces
            old_labels = self.namespace_labels.get(record.name, ())
            if not known or old_labels != record.labels:
                self.namespaces.add(record.name)
                if record.labels:
                    self.namespace_labels[record.name] = record.labels
                else:
                    self.namespace_labels.pop(record.name, None)
                self._changed(k8s.NAMESPACE, Namespace(record.name, old_labels) if known else None, record)
        elif isinstance(record, Node):
            self._mark(k8s.NODE, ("", record.name))
            old_node = self.nodes.get(record.name)
            if old_node != record:
                self.nodes[record.name] = record
                self._changed(k8s.NODE, old_node, record)
        elif isinstance(record, ServiceImport | ImportedSlice):
            self._upsert_multicluster(record)
        elif isinstance(record, Policy):
            pkey = (record.kind, record.namespace, record.name)
            self._mark(record.kind, (record.namespace, record.name))
            old_policy = self.policies.get(pkey)
            if old_policy != record:
                self.policies[pkey] = record
                self._changed(record.kind, old_policy, record)

    def delete(self, kind: str, namespace: str, name: str) -> None:
        key = (namespace, name)
        if kind == k8s.SERVICE:
            svc = self.services.pop(key, None)
            self.unusable.pop(key, None)
            if svc is not None:
                for ip in svc.cluster_ips:
                    _drop_ref(self._services_by_ip, ip, key)
                self._changed(kind, svc, None)
        elif kind == k8s.ENDPOINTSLICE:
            old = self.slices.pop(key, None)
            if old is not None:
                self._unlink_slice(key, old)
                self._changed(kind, old, None)
        elif kind == k8s.POD:
            pod = self.pods.pop(key, None)
            if pod is not None:
                self._unlink_pod(key, pod)
                self._changed(kind, pod, None)
        elif kind == k8s.NAMESPACE:
            if name in self.namespaces:
                self.namespaces.discard(name)
                self._changed(kind, Namespace(name, self.namespace_labels.pop(name, ())), None)
        elif kind == k8s.NODE:
            gone = self.nodes.pop(name, None)
            if gone is not None:
                self._changed(kind, gone, None)
        elif kind in k8s.MULTICLUSTER_KINDS:
            self._delete_multicluster(kind, key)
        elif kind in k8s.POLICY_KINDS:
            gone_policy = self.policies.pop((kind, namespace, name), None)
            if gone_policy is not None:
                self._changed(kind, gone_policy, None)

    def _upsert_service(self, svc: Service) -> None:
        key = (svc.namespace, svc.name)
        self._mark(k8s.SERVICE, key)
        old = self.services.get(key)
        if old == svc:
            return
        if old is not None:
            for ip in old.cluster_ips:
                _drop_ref(self._services_by_ip, ip, key)
        self.services[key] = svc
        for ip in svc.cluster_ips:
            _add_ref(self._services_by_ip, ip, key)
        self._note_target(key, svc)
        self._changed(k8s.SERVICE, old, svc)

    def _note_target(self, key: Key, svc: Service) -> None:
        """Remember (and log, once per value) an ExternalName whose target cannot be a DNS name."""
        problem = svc.target_problem
        if not problem:
            if self.unusable.pop(key, None) is not None:
                log.info("Service %s/%s: its externalName is a DNS name again", *key)
            return
        if self.unusable.get(key) != problem:
            log.warning("Service %s/%s: %s; it answers NXDOMAIN (a Service with no usable target) until "
                        "the value is fixed", key[0], key[1], problem)
        self.unusable[key] = problem

    def _upsert_slice(self, sl: EndpointSlice) -> None:
        key = (sl.namespace, sl.name)
        self._mark(k8s.ENDPOINTSLICE, key)
        old = self.slices.get(key)
        if old == sl:
            return
        if old is not None and old.same_addresses(sl):  # readiness or names changed: same blocks, same Service
            self.slices[key] = sl
            self._changed(k8s.ENDPOINTSLICE, old, sl)
            return
        if old is not None:
            self._unlink_slice(key, old)
        self.slices[key] = sl
        skey = (sl.namespace, sl.service)
        names = self._slices_by_service.get(skey, ())
        if sl.name not in names:
            self._slices_by_service[skey] = tuple(sorted((*names, sl.name)))
        for block in _blocks(sl):
            _add_ref(self._slices_by_block, block, key)
        self._changed(k8s.ENDPOINTSLICE, old, sl)

    def _unlink_slice(self, key: Key, old: EndpointSlice) -> None:
        skey = (old.namespace, old.service)
        names = self._slices_by_service.get(skey, ())
        if old.name in names:
            kept = tuple(n for n in names if n != old.name)
            if kept:
                self._slices_by_service[skey] = kept
            else:
                del self._slices_by_service[skey]
        for block in _blocks(old):
            _drop_ref(self._slices_by_block, block, key)

    def _upsert_pod(self, pod: Pod) -> None:
        key = (pod.namespace, pod.name)
        self._mark(k8s.POD, key)
        old = self.pods.get(key)
        if old == pod:
            return
        if old is not None:
            self._unlink_pod(key, old)
        self.pods[key] = pod
        for ip in pod.ips:
            _add_ref(self._pods_by_ip, ip, key)
        self._pods_by_node.setdefault(pod.node_name, set()).add(key)
        self._changed(k8s.POD, old, pod)

    def _unlink_pod(self, key: Key, old: Pod) -> None:
        for ip in old.ips:
            _drop_ref(self._pods_by_ip, ip, key)
        keys = self._pods_by_node.get(old.node_name)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._pods_by_node[old.node_name]

    def _upsert_multicluster(self, record: ServiceImport | ImportedSlice) -> None:
        key = (record.namespace, record.name)
        if isinstance(record, ServiceImport):
            self._mark(k8s.SERVICE_IMPORT, key)
            old_import = self.service_imports.get(key)
            if old_import != record:
                if old_import is not None:
                    for ip in old_import.ips:
                        _drop_ref(self._imports_by_ip, ip, key)
                self.service_imports[key] = record
                for ip in record.ips:
                    _add_ref(self._imports_by_ip, ip, key)
                self._changed(k8s.SERVICE_IMPORT, old_import, record)
            return
        self._mark(k8s.IMPORTED_SLICE, key)
        old = self.imported_slices.get(key)
        if old == record:
            return
        if old is not None:
            self._unlink_imported(old)
        self.imported_slices[key] = record
        self._imported_by_service.setdefault((record.namespace, record.service), set()).add(record.name)
        for block in _blocks(record.slice):
            _add_ref(self._imported_by_block, block, key)
        self._changed(k8s.IMPORTED_SLICE, old, record)

    def _delete_multicluster(self, kind: str, key: Key) -> None:
        if kind == k8s.SERVICE_IMPORT:
            gone_import = self.service_imports.pop(key, None)
            if gone_import is not None:
                for ip in gone_import.ips:
                    _drop_ref(self._imports_by_ip, ip, key)
                self._changed(kind, gone_import, None)
            return
        gone = self.imported_slices.pop(key, None)
        if gone is not None:
            self._unlink_imported(gone)
            self._changed(kind, gone, None)

    def _unlink_imported(self, old: ImportedSlice) -> None:
        skey = (old.namespace, old.service)
        names = self._imported_by_service.get(skey)
        if names is not None:
            names.discard(old.name)
            if not names:
                del self._imported_by_service[skey]
        key = (old.namespace, old.name)
        for block in _blocks(old.slice):
            _drop_ref(self._imported_by_block, block, key)

    # -- relist ----------------------------------------------------------------------------

    def begin_relist(self, kind: str) -> None:
        """Start replacing every object of `kind`; objects not upserted before end_relist go away."""
        self._relist_seen[kind] = set()

    def _mark(self, kind: str, key: Key) -> None:
        seen = self._relist_seen.get(kind)
        if seen is not None:
            seen.add(key)

    def relisting(self) -> dict[str, frozenset[Key]]:
        """The relists under way: kind -> the keys seen so far (a replica resumes them)."""
        return {kind: frozenset(seen) for kind, seen in self._relist_seen.items()}

    def resume_relist(self, kind: str, seen: frozenset[Key]) -> None:
        """Continue a relist another index began: `seen` were already listed."""
        self._relist_seen[kind] = set(seen)

    def records(self) -> list[SlimChange]:
        """Every object as a change that re-creates it (a replica's starting point)."""
        out = [SlimChange(k8s.NAMESPACE, "", name, Namespace(name, self.namespace_labels.get(name, ())))
               for name in sorted(self.namespaces)]
        out.extend(SlimChange(k8s.NODE, "", name, node) for name, node in self.nodes.items())
        for kind, table in ((k8s.SERVICE, self.services), (k8s.ENDPOINTSLICE, self.slices), (k8s.POD, self.pods)):
            out.extend(SlimChange(kind, ns, name, record) for (ns, name), record in table.items())
        out.extend(SlimChange(k8s.SERVICE_IMPORT, ns, name, si) for (ns, name), si in self.service_imports.items())
        out.extend(SlimChange(k8s.IMPORTED_SLICE, ns, name, im) for (ns, name), im in self.imported_slices.items())
        out.extend(SlimChange(kind, ns, name, p) for (kind, ns, name), p in self.policies.items())
        return out

    def end_relist(self, kind: str) -> int:
        """Delete the objects of `kind` the relist did not see; returns how many were deleted."""
        seen = self._relist_seen.pop(kind, None)
        if seen is None:
            return 0
        stale: list[Key]
        if kind == k8s.SERVICE:
            stale = [k for k in self.services if k not in seen]
        elif kind == k8s.ENDPOINTSLICE:
            stale = [k for k in self.slices if k not in seen]
        elif kind == k8s.POD:
            stale = [k for k in self.pods if k not in seen]
        elif kind == k8s.NAMESPACE:
            stale = [("", n) for n in self.namespaces if ("", n) not in seen]
        elif kind == k8s.NODE:
            stale = [("", n) for n in self.nodes if ("", n) not in seen]
        elif kind == k8s.SERVICE_IMPORT:
            stale = [k for k in self.service_imports if k not in seen]
        elif kind == k8s.IMPORTED_SLICE:
            stale = [k for k in self.imported_slices if k not in seen]
        elif kind in k8s.POLICY_KINDS:
            stale = [(ns, name) for (k, ns, name) in self.policies if k == kind and (ns, name) not in seen]
        else:
            stale = []
        for ns, name in stale:
            self.delete(kind, ns, name)
        return len(stale)

    # -- lookups ---------------------------------------------------------------------------

    def has_namespace(self, name: str) -> bool:
        return name in self.namespaces

    def service(self, namespace: str, name: str) -> Service | None:
        return self.services.get((namespace, name))

    def slices_of(self, namespace: str, service: str) -> list[EndpointSlice]:
        """Every EndpointSlice labelled for the service, in name order (stable answers)."""
        names = self._slices_by_service.get((namespace, service), ())
        return [self.slices[(namespace, n)] for n in names]

    def services_with_cluster_ip(self, ip: str) -> list[Service]:
        """The Services with `ip` among their ClusterIPs, in key order (two share one only briefly, in a
        manifest or mid-change: the PTR answer must not depend on which came first)."""
        return [self.services[k] for k in sorted(_refs(self._services_by_ip, ip))]

    def slices_with_ip(self, ip: str) -> list[EndpointSlice]:
        """The slices with an endpoint at `ip` (canonical text)."""
        packed = packed_ip(ip)
        if packed is None:
            return []
        candidates = (self.slices[k] for k in _refs(self._slices_by_block, _block_of(packed)))
        return [sl for sl in candidates if sl.has_address(packed)]

    def pods_with_ip(self, ip: str) -> list[Pod]:
        return [self.pods[k] for k in _refs(self._pods_by_ip, ip)]

    def pods_on_node(self, node_name: str) -> list[Pod]:
        """The Pods scheduled on a node (spec.nodeName), in no particular order."""
        return [self.pods[k] for k in self._pods_by_node.get(node_name, ())]

    def node(self, name: str) -> Node | None:
        return self.nodes.get(name)

    def service_import(self, namespace: str, name: str) -> ServiceImport | None:
        return self.service_imports.get((namespace, name))

    def imported_slices_of(self, namespace: str, service: str) -> list[ImportedSlice]:
        """Every EndpointSlice imported for the ServiceImport, in name order (stable answers)."""
        names = self._imported_by_service.get((namespace, service))
        if not names:
            return []
        return [self.imported_slices[(namespace, n)] for n in sorted(names)]

    def service_imports_with_ip(self, ip: str) -> list[ServiceImport]:
        """The ServiceImports with `ip` (canonical text) among their clusterset IPs, in key order."""
        return [self.service_imports[k] for k in sorted(_refs(self._imports_by_ip, ip))]

    def imported_slices_with_ip(self, ip: str) -> list[ImportedSlice]:
        """The imported slices with an endpoint at `ip` (canonical text), in key order."""
        packed = packed_ip(ip)
        if packed is None:
            return []
        keys = sorted(_refs(self._imported_by_block, _block_of(packed)))
        return [im for im in (self.imported_slices[k] for k in keys) if im.slice.has_address(packed)]

    def counts(self) -> dict[str, int]:
        endpoints = sum(s.size for s in self.slices.values())
        return {
            "namespaces": len(self.namespaces),
            "services": len(self.services),
            "endpointslices": len(self.slices),
            "endpoints": endpoints,
            "pods": len(self.pods),
            "nodes": len(self.nodes),
            **self._multicluster_counts(),
            **({"dnspolicies": len(self.policies)} if self.policies else {}),
        }

    def _multicluster_counts(self) -> dict[str, int]:
        """ServiceImports and imported slices, once there are any (the keys stay out otherwise)."""
        if not self.service_imports and not self.imported_slices:
            return {}
        return {"serviceimports": len(self.service_imports), "imported_endpointslices": len(self.imported_slices)}


def endpoint_is_ready(ep: Endpoint, svc: Service | None) -> bool:
    """Ready for DNS: `conditions.ready` (absent = ready), or the service publishes unready addresses."""
    return ep.ready or (svc is not None and svc.publish_not_ready)
