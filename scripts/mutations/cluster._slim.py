"""Mutations of nodedns/cluster/_slim.c (the endpoint columns of a watched EndpointSlice, in C)."""

from mutate import Mutation

TESTS = ("tests/unit/cluster/test_slim_c.py", "tests/unit/cluster/test_objects.py")

MUTATIONS = (
    Mutation(
        "c-slim-absent-readiness-not-ready",
        "nodedns/cluster/_slim.c",
        "        truth = 1;\n        v = get(ep, k_conditions);",
        "        truth = 0;\n        v = get(ep, k_conditions);",
        ("tests/unit/cluster/test_slim_c.py",),
        "an endpoint without conditions (ready by the API's rule) is stored not ready: headless names lose it",
    ),
    Mutation(
        "c-slim-ready-only-when-true",
        "nodedns/cluster/_slim.c",
        "                truth = PyObject_IsTrue(v);\n                if (truth < 0)\n                    goto error;\n"
        "            }\n        }",
        "                truth = v == Py_True;\n            }\n        }",
        ("tests/unit/cluster/test_slim_c.py",),
        "a readiness that is true but not the JSON true (1, \"yes\") is taken for not ready, unlike Python's loop",
    ),
    Mutation(
        "c-slim-hostname-not-checked",
        "nodedns/cluster/_slim.c",
        "                if (!is_label(item)) {",
        "                if (0) {",
        ("tests/unit/cluster/test_slim_c.py",),
        "a hostname that is no DNS label is stored without the problem being reported",
    ),
    Mutation(
        "c-slim-label-may-end-with-a-dash",
        "nodedns/cluster/_slim.c",
        "(c != '-' || i == 0 || i == n - 1)",
        "(c != '-' || i == 0)",
        ("tests/unit/cluster/test_slim_c.py",),
        "a hostname ending in '-' passes as a DNS label",
    ),
    Mutation(
        "c-slim-hints-ignored",
        "nodedns/cluster/_slim.c",
        "            if (truth)\n                goto declined;\n        } else if (PyErr_Occurred()) {\n"
        "            goto error;\n        }\n        continue;",
        "        } else if (PyErr_Occurred()) {\n            goto error;\n        }\n        continue;",
        ("tests/unit/cluster/test_slim_c.py",),
        "topology hints (forZones) are dropped from the slices C slims: topology-aware answers lose them",
    ),
)
