"""Shared by several test modules (carried out of tests/unit/cluster/test_records.py): check."""

from __future__ import annotations

from nodedns.cluster.records import Answer, ClusterRecords
from nodedns.dns.pack import RR
from nodedns.dns.wire import QT, RCODE
from tests.support.cluster_fixture import Case


def rdata_text(rr: RR) -> str:
    d = rr.data
    if rr.rtype in (QT.A, QT.AAAA):
        return str(d)
    if rr.rtype in (QT.CNAME, QT.PTR, QT.NS):
        return f"{d}."
    if rr.rtype == QT.SRV:
        prio, weight, number, target = d
        return f"{prio} {weight} {number} {target}."
    if rr.rtype == QT.TXT:
        return " ".join(f'"{s}"' for s in d)
    if rr.rtype == QT.SOA:
        mname, rname, *nums = d
        return f"{mname}. {rname}. " + " ".join(str(n) for n in nums)
    raise AssertionError(f"unexpected record type {rr.rtype}")


def rr_texts(rrs: list[RR], qname: str | None) -> list[str]:
    """`owner TYPE rdata` texts; the owner is "@" when it is `qname` (None: always written out)."""
    return sorted(
        f"{'@' if rr.name == qname else rr.name + '.'} {QT.name(rr.rtype)} {rdata_text(rr)}" for rr in rrs
    )


def check(records: ClusterRecords, case: Case) -> Answer:
    qname = case.fqdn
    found = records.lookup(qname, QT.from_text(case.qtype))
    assert found is not None, f"{qname} is not answered by the cluster zone"
    assert RCODE.name(found.rcode) == case.rcode
    assert found.aa
    assert rr_texts(found.answer, qname) == sorted(case.answer)
    if case.additional is not None:
        assert rr_texts(found.additional, None) == sorted(case.additional)
    if case.rcode == "NXDOMAIN" or not case.answer:
        soas = [rr for rr in found.authority if rr.rtype == QT.SOA]
        assert len(soas) == 1 and len(found.authority) == 1, found.authority
        assert soas[0].name == case.soa_zone
    return found
