"""The labels an answer is counted under and `Slots`, which numbers them as one byte (pure).

Slots. `Slots` gives each combination of the labels an answer is counted under (zone, type, rcode,
plugin, DO, denial) a number 1..255 (0 = unclassified). A stored answer template carries its slot
in its first byte (the ID bytes of a template are never sent: the hit path copies the query's ID
over them), so the hit path counts an answer with `counts[w[0]] += 1`: exact per type and rcode,
no dict lookup. The slow path classifies each response it sends with `Slots.classify(response)`.
Any table the hit path reads must hold templates stamped with `Slots.stamp` (unstamped templates
count as slot 0, `type="other"`, `rcode="unknown"`). The label values are CoreDNS's (its `type`,
`rcode`, `zone` and `plugin` labels), so dashboards made for CoreDNS read ours.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

# CoreDNS plugin/metrics/vars/monitor.go: the types counted under their own name; the rest is "other"
MONITORED_TYPES: frozenset[int] = frozenset(
    {1, 28, 5, 48, 43, 15, 50, 47, 2, 12, 46, 6, 33, 16, 65, 251, 252, 255}
)
_TYPE_TEXT = {1: "A", 28: "AAAA", 5: "CNAME", 48: "DNSKEY", 43: "DS", 15: "MX", 50: "NSEC3", 47: "NSEC",
              2: "NS", 12: "PTR", 46: "RRSIG", 6: "SOA", 33: "SRV", 16: "TXT", 65: "HTTPS", 251: "IXFR",
              252: "AXFR", 255: "ANY"}

# Rcode names as miekg/dns prints them (CoreDNS's rcode label)
_RCODE_TEXT = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED",
               6: "YXDOMAIN", 7: "YXRRSET", 8: "NXRRSET", 9: "NOTAUTH", 10: "NOTZONE", 16: "BADVERS"}

# plugin label values (CoreDNS: the plugin that wrote the response; "" = the server itself)
PLUGIN_CLUSTER = "kubernetes"
PLUGIN_CACHE = "cache"
PLUGIN_FORWARD = "forward"
PLUGIN_FILTER = "filter"  # --filter-aaaa: our NODATA for a forwarded AAAA question (nodedns_filtered_aaaa_total)
PLUGIN_HOSTS = "hosts"  # --hosts: a name or address of a hosts file (CoreDNS's hosts plugin)
PLUGIN_CHAOS = "chaos"  # class CH: id.server., version.bind. (CoreDNS's chaos plugin)
PLUGIN_SERVER = ""

DROPPED_ZONE = "dropped"  # CoreDNS's zone label for queries that never entered the chain
UNCLASSIFIED = 0
NO_RESPONSE = ""  # rcode of a dropped query: counted as a request, not as a response


def type_label(qtype: int) -> str:
    """CoreDNS's `type` label: the type name for monitored types, else "other"."""
    return _TYPE_TEXT[qtype] if qtype in MONITORED_TYPES else "other"


def rcode_label(rcode: int) -> str:
    return _RCODE_TEXT.get(rcode, f"RCODE{rcode}")


def zone_label(zone: str) -> str:
    """`cluster.local` -> `cluster.local.`; the root `` -> `.`."""
    return zone + "." if zone else "."


class SlotLabels(NamedTuple):
    zone: str  # CoreDNS zone label: "cluster.local.", "in-addr.arpa.", ".", or "dropped"
    type: str  # CoreDNS type label
    rcode: str  # "NOERROR", ...; "" for a dropped query (no response)
    plugin: str  # "kubernetes" | "cache" | "forward" | "filter" | "hosts" | "chaos" | "" (server)
    do: bool  # the DO bit was set (coredns_dns_do_requests_total)
    denial: bool  # NXDOMAIN or NODATA (cache type "denial")

    @property
    def path(self) -> str:
        """How the answer was made, in the words of the query log and the explainer."""
        if self.zone == DROPPED_ZONE:
            return "dropped"
        if self.plugin == PLUGIN_CLUSTER:
            return "cluster"
        if self.plugin == PLUGIN_CACHE:
            return "cache"
        if self.plugin == PLUGIN_FORWARD:
            return "upstream" if self.zone == "." else "stub"
        if self.plugin == PLUGIN_FILTER:
            return "filtered"
        if self.plugin == PLUGIN_HOSTS:
            return "hosts"
        if self.plugin == PLUGIN_CHAOS:
            return "chaos"
        return self.rcode.lower() or "unknown"


UNCLASSIFIED_LABELS = SlotLabels(".", "other", "unknown", PLUGIN_SERVER, False, False)
_NOERROR, _FORMERR, _SERVFAIL, _NXDOMAIN, _NOTIMP, _REFUSED, _BADVERS = 0, 1, 2, 3, 4, 5, 16
_SERVER_RCODES = frozenset({_FORMERR, _NOTIMP, _REFUSED, _BADVERS})


class Slots:
    """Numbers the label combinations answers are counted under (1..255; 0 = unclassified).

    zones: every zone a query can be counted under, without trailing dot ("" is the root, always
    added); authoritative: the zones answered from the index (cluster zone, configured reverse
    zones); stub: the stub domains (their forwarded answers have path "stub").
    """

    __slots__ = ("zones", "authoritative", "stub", "labels", "_by_key", "overflow", "filtered")

    def __init__(self, zones: Iterable[str] = (), *, authoritative: Iterable[str] = (),
                 stub: Iterable[str] = ()) -> None:
        names = {z.strip(".").lower() for z in zones} | {""}
        self.zones: tuple[str, ...] = tuple(sorted(names, key=len, reverse=True))
        self.authoritative = frozenset(z.strip(".").lower() for z in authoritative)
        self.stub = frozenset(z.strip(".").lower() for z in stub)
        self.labels: list[SlotLabels] = [UNCLASSIFIED_LABELS]
        self._by_key: dict[SlotLabels, int] = {}
        self.overflow = 0  # label combinations that found no free slot (counted as slot 0)
        # --filter-aaaa: the authority record of our filtered NODATA (cache.filter_soa), by which
        # `classify` tells it from an upstream's NODATA (plugin "filter"); b"": no filter
        self.filtered = b""

    def slot(self, labels: SlotLabels) -> int:
        n = self._by_key.get(labels)
        if n is None:
            if len(self.labels) >= 256:
                self.overflow += 1
                return UNCLASSIFIED
            n = len(self.labels)
            self.labels.append(labels)
            self._by_key[labels] = n
        return n

    def zone_of(self, qname: str) -> str:
        """The most specific configured zone containing qname (both lowercase, no trailing dot)."""
        for z in self.zones:
            if not z or qname == z or qname.endswith("." + z):
                return z
        return ""

    def dropped(self, proto_do: bool = False) -> int:
        return self.slot(SlotLabels(DROPPED_ZONE, "other", NO_RESPONSE, PLUGIN_SERVER, proto_do, False))

    def classify(self, response: bytes, plugin: str | None = None) -> int:
        """The slot of a response we send (or store). Never raises: unreadable means slot 0.

        plugin: who made it when the caller knows (a cache stamping its templates passes "cache");
        else inferred: server-level rcodes without AA are the server's, class CH is "chaos", names in an
        authoritative zone are the index's ("kubernetes"), any other AA answer is a hosts file's (an
        upstream's answer is stored and served with AA cleared), the rest was forwarded.
        """
        try:
            return self._classify(response, plugin)
        except (IndexError, ValueError):
            return UNCLASSIFIED

    def _classify(self, r: bytes, plugin: str | None) -> int:
        if len(r) < 12:
            return UNCLASSIFIED
        if r[4:6] == b"\x00\x00":  # header-only replies (FORMERR, NOTIMP, SERVFAIL after an error)
            return self.slot(SlotLabels(".", "other", rcode_label(r[3] & 0x0F), PLUGIN_SERVER, False, False))
        if r[4:6] != b"\x00\x01":
            return UNCLASSIFIED
        labels: list[str] = []
        pos = 12
        while True:
            n = r[pos]
            if n == 0:
                break
            if n > 63:
                return UNCLASSIFIED
            labels.append(r[pos + 1 : pos + 1 + n].decode("ascii", "replace").lower())
            pos += n + 1
        if pos + 5 > len(r):
            return UNCLASSIFIED
        qtype = (r[pos + 1] << 8) | r[pos + 2]
        rcode = r[3] & 0x0F
        do = False
        # a trailing OPT without options (what we and most servers send): extended rcode and DO
        if r[10:12] != b"\x00\x00" and len(r) >= 11 and r[-11] == 0 and r[-10:-8] == b"\x00\x29" \
                and r[-2:] == b"\x00\x00":
            rcode |= r[-6] << 4
            do = bool(r[-4] & 0x80)
        zone = self.zone_of(".".join(labels))
        aa = bool(r[2] & 0x04)
        if plugin is None:
            if self.filtered and qtype == 28 and rcode == _NOERROR and r[6:10] == b"\x00\x00\x00\x01" \
                    and r.startswith(self.filtered, pos + 5):
                plugin = PLUGIN_FILTER
            elif rcode in _SERVER_RCODES and not aa:
                plugin = PLUGIN_SERVER
            elif r[pos + 3:pos + 5] == b"\x00\x03":  # class CH: ours (nothing of class CH is forwarded)
                plugin = PLUGIN_CHAOS
            elif zone in self.authoritative and (aa or rcode == _SERVFAIL):
                plugin = PLUGIN_CLUSTER
            elif aa:  # authoritative outside the index's zones: a hosts file (forwarded answers lose AA: cache)
                plugin = PLUGIN_HOSTS
            else:
                plugin = PLUGIN_FORWARD
        denial = rcode == _NXDOMAIN or (rcode == _NOERROR and r[6:8] == b"\x00\x00")
        return self.slot(SlotLabels(zone_label(zone), type_label(qtype), rcode_label(rcode), plugin, do, denial))

    def stamp(self, template: bytes, plugin: str | None = None) -> bytes:
        """The template with its slot in byte 0 (the hit path's counter index)."""
        return bytes((self.classify(template, plugin),)) + template[1:]
