"""The package's modules form one-way layers: no module imports, directly
or through others, a module that imports it back (as tests/layering.rs
requires of the module's and the Rust client's sources). An import of a
submodule (`from . import _owner`, `from ._core import Plan`) is an edge
to that submodule; an import of a name from a package (`from .. import
x`, x not a submodule) is an edge to the package's `__init__`."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Optional, Set

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "rwlock_client"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path) -> Dict[str, Path]:
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def imports(name: str, path: Path, known: Dict[str, Path]) -> Set[str]:
    """The package's modules that `name` imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".")
            base = base[: len(base) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in known else target)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == PACKAGE.name:
            found.add(node.module if node.module in known else node.module.rpartition(".")[0])
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in known)
    found.discard(name)
    return {m for m in found if m in known}


def cycle(graph: Dict[str, Set[str]]) -> Optional[List[str]]:
    """One circle of `graph`, or None."""
    state: Dict[str, int] = {}
    stack: List[str] = []

    def visit(node: str) -> Optional[List[str]]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_package_has_no_import_circle() -> None:
    known = modules(PACKAGE)
    assert len(known) >= 10, known
    graph = {name: imports(name, path, known) for name, path in known.items()}
    # The check sees the package's own imports: __init__ re-exports lock.
    assert "rwlock_client.lock" in graph["rwlock_client"]
    found = cycle(graph)
    assert found is None, "import circle: " + " -> ".join(found or [])


def test_a_circle_is_found(tmp_path: Path) -> None:
    root = tmp_path / "rwlock_client"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("from .a import A\n")
    (root / "a.py").write_text("from .sub.b import B\nA = 1\n")
    (root / "sub" / "__init__.py").write_text("")
    (root / "sub" / "b.py").write_text("from .. import a\nB = 2\n")
    known = modules(root)
    graph = {name: imports(name, path, known) for name, path in known.items()}
    assert cycle(graph) == ["rwlock_client.a", "rwlock_client.sub.b", "rwlock_client.a"]
    (root / "sub" / "b.py").write_text("B = 2\n")
    graph = {name: imports(name, path, known) for name, path in known.items()}
    assert cycle(graph) is None
