"""Mutations of nodedns/cli/top.py (`nodedns top`)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_insight_agent.py",)

TABLE = "tests/e2e/test_insight_agent.py::test_nodedns_top_prints_a_table_like_kubectl_top_and_the_advice"

MUTATIONS = (
    Mutation("top-namespace-not-sent", "nodedns/cli/top.py",
             '    if namespace:\n        params["namespace"] = namespace',
             '    if False:\n        params["namespace"] = namespace',
             ("tests/e2e/test_insight_agent.py::test_nodedns_top_keeps_to_a_namespace",),
             "`nodedns top --namespace NS` shows every namespace"),
    Mutation("top-waste-as-a-fraction", "nodedns/cli/top.py",
             '''    waste = f"{round(float(fig.get('waste') or 0) * 100)}%"''',
             '''    waste = f"{float(fig.get('waste') or 0):g}%"''', (TABLE,),
             "WASTE reads 0.75% for three queries in four"),
    Mutation("top-columns-not-aligned", "nodedns/cli/top.py",
             '    return ["   ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]',
             '    return [" ".join(r) for r in rows]', (TABLE,),
             "the columns of `nodedns top` do not line up as kubectl top's do", found="yes"),
    Mutation("top-advice-left-out", "nodedns/cli/top.py",
             "    advice = data.get(\"advice\") or []", "    advice: list[str] = []", (TABLE,),
             "`nodedns top` prints no advice"),
)
