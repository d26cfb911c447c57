"""Mutations of nodedns/forward/zones.py (each zone's settings resolved: inheritance, the longest match)."""

from mutate import Mutation

TESTS = ("tests/unit/forward/test_zones.py",)

MUTATIONS = (
    Mutation(
        "zone-policy-not-inherited-from-dot",
        "nodedns/forward/zones.py",
        "        policy=spec.policy if spec.policy is not None else base.policy,",
        '        policy=spec.policy if spec.policy is not None else "random",',
        ("tests/unit/forward/test_zones.py::test_the_documented_zones_are_read_and_every_unset_value_comes_from_"
         "dot_then_the_flags",),
        "a zone that sets no policy takes the built-in one, not `.`'s",
    ),
    Mutation(
        "zone-match-exact-only",
        "nodedns/forward/zones.py",
        '                name = name.partition(".")[2]',
        '                name = ""',
        ("tests/unit/forward/test_zones.py::test_the_longest_zone_wins_and_dot_is_the_default",),
        "a name below a zone (db.corp.example) is not in it: only the zone's own name is",
    ),
    Mutation(
        "reload-keeps-a-changed-zones-cache",
        "nodedns/forward/zones.py",
        "            if old is None or new is None or replace(old, upstreams=()) != replace(new, upstreams=()):",
        "            if old is None or new is None:",
        ("tests/unit/forward/test_zones.py::test_a_reload_keeps_the_cache_of_unchanged_zones_and_a_wrong_zone_keeps_"
         "the_last_good_config",),
        "a reload that changes a zone's TTL cap keeps its answers cached under the old cap",
    ),
    Mutation(
        "stub-domain-force-tcp-lost-in-its-zone",
        "nodedns/forward/zones.py",
        "            zone = replace(zone, force_tcp=True)",
        "            pass",
        ("tests/unit/forward/test_zones.py::test_stub_domains_become_zones_and_zones_add_their_settings",),
        "a --stub-domain DOMAIN=ADDR,force_tcp goes over UDP once it is a zone",
    ),
)
