"""Mutations of the worked deploy overlay examples/overlay/ (the image named with kubectl alone)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_doc_commands.py",)

MUTATIONS = (
    Mutation("overlay-renames-an-image-no-one-uses", "examples/overlay/kustomization.yaml",
             "  - name: localhost/nodedns\n", "  - name: nodedns\n",
             ("tests/e2e/test_doc_commands.py::test_the_command_runs_as_shown",),
             "the example overlay matches no image: the DaemonSet still names the local build, which no node pulls"),
)
