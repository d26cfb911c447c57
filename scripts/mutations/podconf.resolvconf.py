"""Mutations of nodedns/podconf/resolvconf.py (a Pod's resolv.conf as the kubelet writes it)."""

from mutate import Mutation

TESTS = ("tests/unit/podconf/test_resolvconf.py", "tests/e2e/test_cli_resolv_conf.py",
         "tests/unit/observe/test_explain.py")

OWN = "tests/unit/podconf/test_resolvconf.py"

MUTATIONS = (
    Mutation("host-network-cluster-first-gets-the-cluster-dns", "nodedns/podconf/resolvconf.py",
             "    if spec.dns_policy == CLUSTER_FIRST and not spec.host_network:",
             "    if spec.dns_policy == CLUSTER_FIRST:", (OWN,),
             "a hostNetwork Pod with ClusterFirst gets the cluster DNS (the kubelet gives it the node's resolv.conf)"),
    Mutation("four-nameservers-kept", "nodedns/podconf/resolvconf.py", "    if len(nameservers) <= MAX_NAMESERVERS:",
             "    if len(nameservers) <= MAX_NAMESERVERS + 1:", (OWN,),
             "a Pod with four nameservers keeps them all (glibc reads three)"),
    Mutation("search-line-limit-one-over", "nodedns/podconf/resolvconf.py",
             '    while _blen(" ".join(kept)) > MAX_SEARCH_LINE_CHARS:',
             '    while _blen(" ".join(kept)) > MAX_SEARCH_LINE_CHARS + 1:', (OWN,),
             "a search line of 2049 bytes is written whole", found="yes"),
    Mutation("dns-config-option-does-not-override", "nodedns/podconf/resolvconf.py",
             '        merged[option.name] = option.value or ""  # the name verbatim: `ndots:2` is not split',
             '        merged.setdefault(option.name, option.value or "")  # the name verbatim: `ndots:2` is not split',
             (OWN,), "dnsConfig `ndots: 1` does not replace the kubelet's ndots:5"),
    Mutation("cluster-searches-without-the-host-ones", "nodedns/podconf/resolvconf.py",
             '    return _dedup([f"{namespace}.svc.{domain}", f"svc.{domain}", domain, *host_searches])',
             '    return _dedup([f"{namespace}.svc.{domain}", f"svc.{domain}", domain])', (OWN,),
             "a ClusterFirst Pod loses the node's own search domains"),
)
