"""The packages under ``app/`` import each other without cycles (imports under
``TYPE_CHECKING`` and inside functions count too): a package depends on the ones below it,
never back up, so each layer can be read, tested and replaced on its own."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app"


def _node(module: str) -> str | None:
    """The graph node of an ``app.…`` module: its first component under ``app`` (a package,
    or a top-level module such as ``services``)."""
    parts = module.split(".")
    if parts[0] != "app" or len(parts) < 2:
        return None
    return parts[1]


def _imported(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            if node.module == "app":
                found.update(f"app.{alias.name}" for alias in node.names)
            else:
                found.add(node.module)
    return found


def package_graph() -> dict[str, dict[str, set[str]]]:
    """node -> imported node -> the files (relative to ``app/``) that import it."""
    graph: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path in sorted(APP.rglob("*.py")):
        relative = path.relative_to(APP)
        source = relative.parts[0].removesuffix(".py")
        if source == "__init__":
            continue
        for module in _imported(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            target = _node(module)
            if target is not None and target != source:
                graph[source][target].add(str(relative))
    return graph


def cycles(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_the_packages() -> None:
    graph = package_graph()
    assert "db" in graph["tasks"]
    assert "tasks" in graph["worker"]


def test_the_packages_under_app_import_each_other_without_cycles() -> None:
    graph = package_graph()
    report = []
    for component in cycles(graph):
        edges = [
            f"  {source} -> {target}: {', '.join(sorted(graph[source][target]))}"
            for source in component
            for target in sorted(graph[source])
            if target in component
        ]
        report.append(" <-> ".join(component) + "\n" + "\n".join(edges))
    assert not report, "package cycles under app/:\n" + "\n".join(report)


def test_a_cycle_is_reported() -> None:
    graph: dict[str, dict[str, set[str]]] = {
        "a": {"b": {"a/x.py"}},
        "b": {"c": {"b/y.py"}},
        "c": {"a": {"c/z.py"}},
        "d": {"a": {"d.py"}},
    }
    assert cycles(graph) == [["a", "b", "c"]]
