"""The package's import graph: no module imports another in a cycle, and each layer imports only those below it.

The layers are the folders (README, "How it works"): language and engine know nothing of each other,
program runs the language on the engine, tools are built on programs, and cli is the surface over all.
Imports inside functions count too (a lazy import is still a dependency); those under TYPE_CHECKING don't.
"""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import REPO

PACKAGE = REPO / "gradcalc"
# What each layer may import besides itself; the shared leaves (errors, files, inert) are below every layer.
ALLOWED = {
    "language": set(),
    "engine": set(),
    "program": {"language", "engine"},
    "tools": {"language", "engine", "program"},
    "cli": {"language", "engine", "program", "tools"},
}
SHARED = {"errors", "files", "inert"}


def _modules() -> dict[str, tuple[Path, bool]]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


MODULES = _modules()


def _imports(name: str) -> set[str]:
    """The gradcalc modules that `name` imports, anywhere in its body except under TYPE_CHECKING."""
    path, is_package = MODULES[name]
    here = name.split(".") if is_package else name.split(".")[:-1]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(here[:len(here) - node.level + 1] + [node.module or ""]) if node.level else node.module
            base = (base or "").rstrip(".")
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {module for module in found if module in MODULES and module != name}


GRAPH = {name: _imports(name) for name in MODULES}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _cycle_from(start: str) -> list[str] | None:
    """A path start -> ... -> start through the import graph, if there is one."""
    stack, seen = [(start, [start])], set()
    while stack:
        module, path = stack.pop()
        for target in GRAPH[module]:
            if target == start:
                return path + [start]
            if target not in seen:
                seen.add(target)
                stack.append((target, path + [target]))
    return None


def test_the_graph_is_read() -> None:
    # The walk above must see imports, or the tests below pass on an empty graph.
    assert "gradcalc.engine.graph" in GRAPH["gradcalc.engine.autodiff"]
    assert "gradcalc.files" in GRAPH["gradcalc.engine.backend"]  # imported inside a function only


def test_no_module_imports_another_in_a_cycle() -> None:
    cycles = [" -> ".join(cycle) for name in sorted(GRAPH) if (cycle := _cycle_from(name))]
    assert not cycles, "\n".join(cycles)


def test_each_layer_imports_only_the_layers_below_it() -> None:
    upward = []
    for module, targets in GRAPH.items():
        layer = _layer(module)
        if layer not in ALLOWED:
            continue
        for target in targets:
            other = _layer(target)
            if other != layer and other not in SHARED and other not in ALLOWED[layer] and target != "gradcalc":
                upward.append(f"{module} imports {target}")
    assert not upward, "\n".join(sorted(upward))
