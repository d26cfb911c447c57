"""Mutations of nodedns/policy/rpz.py (an RPZ zone file read: its triggers, actions, local data, what is left out)."""

from mutate import Mutation

TESTS = ("tests/unit/policy/test_rpz.py",)

_T = "tests/unit/policy/test_rpz.py::"

MUTATIONS = (
    Mutation("rpz-wildcard-matches-its-own-name", "nodedns/policy/rpz.py",
             "            for p in parents:",
             "            for p in [qname, *parents]:",
             (_T + "test_qname_triggers_exact_and_wildcard",),
             "`*.wild.example` also rewrites wild.example itself (RPZ: only the names below it)"),
    Mutation("rpz-passthru-denies", "nodedns/policy/rpz.py",
             '            code = {".": NXDOMAIN, "*.": NODATA, "rpz-passthru.": PASSTHRU, '
             '"rpz-drop.": DROP}.get(target)',
             '            code = {".": NXDOMAIN, "*.": NODATA, "rpz-passthru.": NXDOMAIN, '
             '"rpz-drop.": DROP}.get(target)',
             (_T + "test_qname_triggers_exact_and_wildcard",),
             "a feed's passthru exception (CNAME rpz-passthru.) is NXDOMAIN"),
    Mutation("rpz-unsupported-trigger-applied-as-a-name", "nodedns/policy/rpz.py",
             "        if labels[-1] in UNSUPPORTED_TRIGGERS:",
             "        if False:",
             (_T + "test_what_is_not_supported_is_counted_and_the_rest_applies",),
             "an rpz-ip trigger is applied to a made-up name and not reported as unsupported"),
    Mutation("rpz-local-data-answers-every-type", "nodedns/policy/rpz.py",
             "    return [r for r in records if r[0] == qtype], None",
             "    return list(records), None",
             (_T + "test_local_data_answers_its_types_and_nodata_for_the_others",),
             "local data of one type answers a question of another (RPZ: NODATA)"),
    Mutation("rpz-feed-unbounded", "nodedns/policy/rpz.py",
             "        if self.entries >= MAX_ENTRIES:",
             "        if False:",
             (_T + "test_entries_past_the_bound_are_counted_not_kept",),
             "a feed past the bound is kept whole: its memory is bounded by nothing but the ConfigMap"),
)
