"""A JSON-able view of a DNS message, for the lookup explainer, the shadow and logs.
"""
from __future__ import annotations

from typing import Any

from nodedns.dns.wire import QT, RCODE, _dnslib


def describe(data: bytes) -> dict[str, Any]:
    """A JSON-able view of a message (for the lookup explainer and logs); never raises."""
    try:
        record = _dnslib().DNSRecord.parse(data)
    except Exception as exc:
        return {"error": f"unparseable: {exc.__class__.__name__}"}
    h = record.header

    def rrs(section: Any) -> list[dict[str, Any]]:
        return [
            {"name": str(rr.rname), "type": QT.name(rr.rtype), "ttl": rr.ttl, "data": str(rr.rdata)}
            for rr in section
            if rr.rtype != QT.OPT
        ]

    return {
        "rcode": RCODE.name(h.rcode),
        "flags": [f for f in ("aa", "tc", "rd", "ra") if getattr(h, f)],
        "answer": rrs(record.rr),
        "authority": rrs(record.auth),
        "additional": rrs(record.ar),
    }
