"""Mutations of nodedns/cluster/changes.py (the watch path's one fan-out: a change's tags named once)."""

from mutate import Mutation

TESTS = ("tests/unit/cluster/test_changes.py",)

MUTATIONS = (
    Mutation(
        "change-tags-named-per-listener",
        "nodedns/cluster/changes.py",
        "        if self._tags is _UNNAMED:",
        "        if True:",
        ("tests/unit/cluster/test_changes.py::test_a_change_names_its_tags_once_however_many_listeners_read_them",
         "tests/unit/cluster/test_changes.py::test_a_supervisor_names_the_tags_of_a_change_once_for_its_answers_and_"
         "its_workers"),
        "every listener names the tags again: a supervisor works out each change's tags twice",
    ),
    Mutation(
        "change-reaches-only-the-first-listener",
        "nodedns/cluster/changes.py",
        "        for listener in self._listeners:\n            listener(change)",
        "        for listener in self._listeners[:1]:\n            listener(change)",
        ("tests/unit/cluster/test_changes.py::test_listeners_hear_each_change_in_the_order_they_were_added_with_its_"
         "old_and_new_form",),
        "only the resolver hears a change: the workers, insight and the allow list never learn of it",
    ),
    Mutation(
        "change-tags-of-the-old-form-only",
        "nodedns/cluster/changes.py",
        "            self._tags = change_tags(self.kind, self.old, self.new)",
        "            self._tags = change_tags(self.kind, self.old, self.old)",
        ("tests/unit/cluster/test_changes.py::test_a_change_names_its_tags_once_however_many_listeners_read_them",),
        "a created object names no tags: answers stored before it (its NXDOMAIN) stay",
    ),
)
