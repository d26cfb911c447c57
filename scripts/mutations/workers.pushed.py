"""Mutations of nodedns/workers/pushed.py (what the supervisor pushes: the allow list's inputs, autopath plans)."""

from mutate import Mutation

TESTS = ("tests/unit/workers/test_pushed.py", "tests/unit/serve/test_invalidation.py")

SAME = "tests/unit/workers/test_pushed.py::test_a_worker_admits_exactly_the_clients_the_supervisor_admits"

MUTATIONS = (
    Mutation("pushed-allow-list-always-open", "nodedns/workers/pushed.py",
             "        self._set([ipaddress.ip_network(n) for n in rules.networks], open_=rules.open)",
             "        self._set([ipaddress.ip_network(n) for n in rules.networks], open_=True)", (SAME,),
             "with --workers, every client is answered whatever the node's pod CIDRs (the allow list is off)"),
    Mutation("pushed-pod-ips-include-host-network", "nodedns/workers/pushed.py",
             " if not p.host_network for ip in p.ips)", " for ip in p.ips)", (SAME,),
             "a hostNetwork Pod's address (a node address) is admitted by the workers as one of this node's Pods"),
    Mutation("pushed-pod-ips-dropped", "nodedns/workers/pushed.py",
             "        self.pod_cidrs, self.pod_ips = tuple(rules.pod_cidrs), rules.pod_ips",
             "        self.pod_cidrs, self.pod_ips = tuple(rules.pod_cidrs), frozenset()", (SAME,),
             "with --workers, this node's Pods outside its pod CIDRs (a CNI with its own IPAM) are refused"),
)
