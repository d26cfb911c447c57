"""Mutations of nodedns/names.py (names, IPs, pod labels, host:port)."""

from mutate import Mutation

TESTS = ("tests/unit/test_names_canonical.py", "tests/unit/cluster/test_records.py", "tests/e2e/test_cli_serve.py",
         "tests/unit/forward/test_upstream_config.py", "tests/unit/cluster/test_objects.py",
         "tests/e2e/test_unusable_names.py")

OWN = "tests/unit/test_names_canonical.py"

MUTATIONS = (
    Mutation("dashed-ipv4-with-a-double-dash", "nodedns/names.py",
             '    if label.count("-") == 3 and "--" not in label:', '    if label.count("-") == 3:', (OWN,),
             "a pod label like `fd00--1-2` (three dashes, one doubled) is read as IPv4 and answers nothing",
             found="yes"),
    Mutation("port-65536-accepted", "nodedns/names.py",
             "        if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:",
             "        if not port_text.isdigit() or not 0 <= int(port_text) <= 65536:", (OWN,),
             "`--upstream 10.0.0.1:65536` is taken", found="yes"),
    Mutation("ipv4-mapped-ipv6-kept-as-ipv6", "nodedns/names.py",
             "    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:", "    if False:",
             (OWN, "tests/unit/cluster/test_objects.py"),
             "`::ffff:10.0.0.1` endpoints keep their IPv6 spelling (no A record)"),
    Mutation("subdomain-of-254-characters-taken", "nodedns/names.py", "    if not s or len(s) > 253:",
             "    if not s or len(s) > 254:", (OWN,), "a stub domain of 254 characters (no DNS name) is taken",
             found="yes"),
    Mutation("text-after-a-bracketed-address-ignored", "nodedns/names.py",
             "        if rest and not rest.startswith(\":\"):\n            raise ValueError",
             "        if False:\n            raise ValueError", (OWN,), "`[::1]x` is read as [::1]", found="yes"),
    Mutation(
        "label-limit-off-by-one",
        "nodedns/names.py",
        "        if len(label) > MAX_LABEL:",
        "        if len(label) > MAX_LABEL + 1:",
        ("tests/e2e/test_unusable_names.py::test_a_name_fits_the_wire_only_with_labels_of_1_to_63_octets_and_253_"
         "characters",),
        "a 64-octet label passes as a DNS label",
        found="yes",
    ),
)
