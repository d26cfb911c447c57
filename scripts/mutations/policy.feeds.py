"""Mutations of nodedns/policy/feeds.py (the ConfigMaps of RPZ feeds watched, their keys read into feeds)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_policy_rpz.py",)

_T = "tests/e2e/test_policy_rpz.py::"

MUTATIONS = (
    Mutation("feeds-watch-every-configmap-of-the-namespace", "nodedns/policy/feeds.py",
             '                    field_selector=f"metadata.name={name}", required=False, '
             'key=f"configmaps/{namespace}/{name}",',
             '                    required=False, key=f"configmaps/{namespace}/{name}",',
             (_T + "test_a_feed_denies_nodatas_local_datas_passthrus_and_drops_for_the_pods_it_selects",),
             "the agent lists and watches every ConfigMap of the feed's namespace, not the one named"),
    Mutation("feeds-missing-configmap-unsaid", "nodedns/policy/feeds.py",
             "                self.maps[key] = None  # listed, and not there",
             "                pass",
             (_T + "test_a_feed_deleted_while_the_watch_was_cut_is_dropped_on_the_relist",),
             "a ConfigMap deleted while the watch was cut stays applied from the stale copy after the relist"),
    Mutation("feeds-change-not-read", "nodedns/policy/feeds.py",
             "        if self._texts.get(ref) == seen and (text is not None or ref in self.book.feeds):",
             "        if ref in self._texts:",
             (_T + "test_a_feed_denies_nodatas_local_datas_passthrus_and_drops_for_the_pods_it_selects",
              _T + "test_a_missing_configmap_or_key_is_a_condition_and_the_rules_still_apply"),
             "a change of the feed's ConfigMap takes no effect until a restart"),
    Mutation("feeds-dropped-configmap-never-watched-again", "nodedns/policy/feeds.py",
             "            self._watched.discard(key)\n",
             "",
             (_T + "test_a_feed_dropped_from_its_only_policy_and_named_again_unchanged_is_read_again_and_applies",),
             "a feed dropped from its only policy and named again is never read again (its ConfigMap taken for "
             "watched still): its rules are lost until a restart", found="yes"),
)
