"""Shared by several test modules (carried out of tests/unit/cluster/test_cluster_zone.py): TRANSPORTS, ask, check."""

from __future__ import annotations

from typing import Any

import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.query
import dns.rcode
import dns.rdatatype

from tests.support.cluster_fixture import Case
from tests.support.helpers import RunningAgent

TRANSPORTS = ["udp", "tcp"]


def ask(agent: RunningAgent, name: str, rdtype: str, transport: str, **kw: Any) -> dns.message.Message:
    kw.setdefault("edns", False)  # a plain query unless the test asks for EDNS
    return agent.query(name, rdtype, tcp=transport == "tcp", **kw)


def texts(section: list[Any], qname: str | None) -> list[str]:
    """`owner TYPE rdata` texts of a section (the OPT pseudo-record is not in dnspython's sections)."""
    owner_of_question = dns.name.from_text(qname) if qname else None
    out = []
    for rrset in section:
        owner = "@" if rrset.name == owner_of_question else rrset.name.to_text().lower()
        out.extend(f"{owner} {dns.rdatatype.to_text(rrset.rdtype)} {rd.to_text()}" for rd in rrset)
    return sorted(out)


def check(agent: RunningAgent, case: Case, transport: str) -> dns.message.Message:
    """Ask as a modern stub does (EDNS, 1232 bytes over UDP) and compare with the table.

    Without EDNS a few table answers exceed 512 bytes and are truncated (checked separately).
    """
    r = ask(agent, case.fqdn, case.qtype, transport, edns=0, payload=1232)
    assert dns.rcode.to_text(r.rcode()) == case.rcode
    assert r.flags & dns.flags.QR and r.flags & dns.flags.AA
    assert not r.flags & dns.flags.TC
    assert texts(r.answer, case.fqdn) == sorted(case.answer)
    if case.additional is not None:
        assert texts(r.additional, None) == sorted(case.additional)
    if case.rcode == "NXDOMAIN" or not case.answer:
        assert [(rrset.name.to_text(), rrset.rdtype) for rrset in r.authority] == [
            (case.soa_zone + ".", dns.rdatatype.SOA)
        ]
        assert len(r.authority[0]) == 1
    return r
