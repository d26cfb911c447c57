"""Mutations of nodedns/cluster/records/clusterset.py (the clusterset zone)."""

from mutate import Mutation

TESTS = ("tests/unit/cluster/test_records.py", "tests/unit/cluster/test_cluster_zone.py",
         "tests/unit/cluster/test_clusterset.py",
         "tests/e2e/test_clusterset_zone.py", "tests/unit/serve/test_invalidation.py",
         "tests/unit/forward/test_forward.py",
         "tests/unit/cluster/test_existence.py", "tests/e2e/test_clusterset_ptr.py", "tests/unit/cluster/test_index.py")

CLUSTERSET = "tests/unit/cluster/test_clusterset.py"

MUTATIONS = (
    Mutation(
        "clusterset-srv-one-record-per-port-and-protocol",
        "nodedns/cluster/records/clusterset.py",
        """        target = self._import_fqdn(imported)
        uniq = list(dict.fromkeys(p.port for p in ports))""",
        """        target = self._import_fqdn(imported)
        uniq = [p.port for p in ports]""",
        (CLUSTERSET,),
        "a ServiceImport exposing one port number on UDP and TCP gets two identical SRV records (weight 50 each)",
        found="yes",
    ),
    Mutation(
        "clusterset-named-srv-ignores-the-protocol",
        "nodedns/cluster/records/clusterset.py",
        "            ports = [p for p in imported.ports if p.name == pname and p.protocol == proto]",
        "            ports = [p for p in imported.ports if p.name == pname]",
        (CLUSTERSET,),
        "`_dns._tcp.<import>` answers with the UDP port named dns",
    ),
    Mutation(
        "clusterset-srv-targets-a-slice-without-a-source-cluster",
        "nodedns/cluster/records/clusterset.py",
        "            if not im.cluster:\n                continue  # no source cluster: no name to point at",
        "            if False:\n                continue  # no source cluster: no name to point at",
        (CLUSTERSET,),
        "a headless import's SRV names a target for an imported slice without a source-cluster label "
        "(`<host>.None.<svc>...`, a name that does not exist)",
    ),
)
