"""No import cycle among the modules of memory_portal/ (migrations aside): a static graph of
every `import` and `from … import` in each module, the ones inside functions too (a lazy
import hides a cycle from Python, not from a reader), checked for strongly connected parts.
The checker is itself tested on small synthetic packages."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def module_names(package_dir: Path) -> dict[str, tuple[Path, bool]]:
    """Every module of the package under `package_dir`: dotted name -> (file, is a package)."""
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        relative = path.relative_to(package_dir.parent).with_suffix("")
        if "migrations" in relative.parts:
            continue
        parts = list(relative.parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        modules[".".join(parts)] = (path, is_package)
    return modules


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports (`from x import name` counts as
    importing `x.name` when that is a module, `x` otherwise)."""
    modules = module_names(package_dir)
    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in modules.items():
        here = name.split(".") if is_package else name.split(".")[:-1]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base_parts = here[: len(here) - (node.level - 1)]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                for alias in node.names:
                    child = f"{base}.{alias.name}"
                    targets.add(child if child in modules else base)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles: each strongly connected set of two or more modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            part = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                part.append(member)
                if member == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def write_package(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root / "pkg"


def test_the_checker_finds_a_cycle_closed_by_a_lazy_relative_import(tmp_path):
    package = write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/models.py": "",
            "pkg/services/__init__.py": "from .notes import save\n",
            "pkg/services/notes.py": (
                "from ..models import *\n"
                "def save():\n"
                "    from .routines import ensure\n"
                "    ensure()\n"
            ),
            "pkg/services/routines.py": "from .notes import save\ndef ensure(): ...\n",
            "pkg/tasks.py": "from pkg.services import routines\n",
            "pkg/migrations/0001_initial.py": "from pkg import tasks\n",
        },
    )
    graph = import_graph(package)
    assert "pkg.migrations.0001_initial" not in graph, "migrations are left out"
    assert graph["pkg.services.notes"] == {"pkg.models", "pkg.services.routines"}
    assert graph["pkg.tasks"] == {"pkg.services.routines"}, "`from pkg.services import routines`"
    assert cycles(graph) == [["pkg.services.notes", "pkg.services.routines"]]


def test_the_checker_finds_a_three_module_cycle_and_passes_a_tree(tmp_path):
    triangle = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(triangle) == [["a", "b", "c"]]
    package = write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "import pkg.b\nfrom pkg import c\n",
            "pkg/b.py": "from . import c\nimport os\n",
            "pkg/c.py": "from .sub.d import thing\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/d.py": "import json\nthing = 1\n",
        },
    )
    graph = import_graph(package)
    assert graph["pkg.a"] == {"pkg.b", "pkg.c"}
    assert graph["pkg.c"] == {"pkg.sub.d"}
    assert cycles(graph) == []
    (package / "sub" / "d.py").write_text("def late():\n    from ..a import x\n")
    assert cycles(import_graph(package)) == [["pkg.a", "pkg.b", "pkg.c", "pkg.sub.d"]]


def test_memory_portal_has_no_import_cycle():
    graph = import_graph(ROOT / "memory_portal")
    assert len(graph) > 50, "the checker sees the whole package"
    assert "memory_portal.memory.services.notes" in graph
    assert cycles(graph) == []
