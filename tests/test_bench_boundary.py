"""The benchmarks live beside the product (`bench/`), not in it: no module of memory_portal/
imports `bench` or `tests`, the wheel's packages are the product's alone, and `bench/` reaches
the product through public names only (none starting with `_`)."""

from __future__ import annotations

import ast
import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) of every import in `path`, the ones inside functions too."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.append((node.module or "", [alias.name for alias in node.names]))
    return found


def test_the_product_imports_neither_the_benchmarks_nor_the_tests():
    offenders = [
        f"{path.relative_to(ROOT)}: {module}"
        for path in sorted((ROOT / "memory_portal").rglob("*.py"))
        for module, _ in imports(path)
        if module.split(".")[0] in {"bench", "tests", "faults", "fuzz"}
    ]
    assert not offenders


def test_the_wheel_ships_the_product_only():
    """setuptools' package discovery keeps the top-level packages its `include` patterns match."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = config["packages"]["find"]["include"]
    top_level = [p.parent.name for p in ROOT.glob("*/__init__.py")]
    assert {"memory_portal", "bench", "tests"} <= set(top_level)
    shipped = {name for name in top_level for pat in patterns if fnmatch.fnmatch(name, pat)}
    assert shipped == {"memory_portal"}


def test_the_benchmarks_use_public_names_of_the_product():
    offenders = []
    for path in sorted((ROOT / "bench").rglob("*.py")):
        for module, names in imports(path):
            if not module.startswith("memory_portal"):
                continue
            private = [p for p in module.split(".") if p.startswith("_")]
            private += [n for n in names if n.startswith("_")]
            if private:
                offenders.append(f"{path.relative_to(ROOT)}: {module} {private}")
    assert not offenders
