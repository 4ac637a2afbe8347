"""The client's modules (client/, package `despina`) import each other as a tree: no cycle among their
module-level imports (those under `if TYPE_CHECKING:` aside), and the leaves the launch paths share
import no other module of the client. Read from the source with `ast`; nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

CLIENT = Path(__file__).resolve().parents[1] / "client"
LEAVES = ("despina.specialization", "despina.remote_errors", "despina.frontend.callable", "despina.caller")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(CLIENT).with_suffix("").parts)
    return ".".join(["despina", *(parts[:-1] if parts[-1] == "__init__" else parts)])


MODULES = {module_name(p): p for p in CLIENT.rglob("*.py")}


def imported(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The client modules `node` imports, as Python resolves it (`from pkg import sub` imports sub)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = module if MODULES[module].name == "__init__.py" else module.rsplit(".", 1)[0]
        for _ in range(max(node.level - 1, 0)):
            base = base.rsplit(".", 1)[0]
        target = (f"{base}.{node.module}" if node.module else base) if node.level else node.module or ""
        subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in MODULES]
        names = subs + ([target] if len(subs) < len(node.names) else [])
    found = []
    for name in names:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        # a package is initialized before its submodules: importing an ancestor adds no edge
        if name and name != module and not module.startswith(name + "."):
            found.append(name)
    return found


def module_level_imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        edges: set[str] = set()
        pending: list[ast.AST] = [ast.parse(path.read_text())]
        while pending:
            for node in ast.iter_child_nodes(pending.pop()):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    continue
                if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                    continue
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    edges.update(imported(module, node))
                pending.append(node)
        graph[module] = edges
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `graph` (its modules in order, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        path.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                return path[path.index(w):] + [w]
            if w not in state and (found := visit(w)) is not None:
                return found
        path.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if v not in state and (found := visit(v)) is not None:
            return found
    return None


def test_the_client_imports_form_no_cycle() -> None:
    graph = module_level_imports()
    assert "despina.jit" in graph and graph["despina.jit"] >= {"despina.frontend.codegen", "despina.specialization"}
    found = cycle(graph)
    assert found is None, "the client's module-level imports form a cycle: " + " -> ".join(found or [])


def test_the_shared_leaves_import_no_other_client_module() -> None:
    graph = module_level_imports()
    for leaf in LEAVES:
        assert graph[leaf] <= set(LEAVES) | {"despina.frontend.source", "despina.frontend.errors"}, (leaf, graph[leaf])


def test_the_check_finds_a_cycle() -> None:
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None
