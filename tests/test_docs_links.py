"""The repository's docs stand alone and stay true to the code: every relative link in README.md
and docs/*.md points at a file or folder of this repository, and the names the architecture map
gives in backquotes after a linked module exist in it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_relative_links_resolve_inside_the_repository(doc):
    broken = []
    for target in LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # a URL
        path = (doc.parent / target).resolve()
        if not path.exists() or ROOT not in (path, *path.parents):
            broken.append(target)
    assert not broken, f"{doc.name}: links that do not resolve inside the repository: {broken}"


def _defined_names() -> set[str]:
    """Every module, package, function, class and assigned name of the product and its tests."""
    names = set()
    for path in [*(ROOT / "memory_portal").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]:
        names.add(path.parent.name if path.name == "__init__.py" else path.stem)
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return names


# Django's own names the architecture map mentions.
FRAMEWORK_NAMES = {"select_for_update"}
CODE_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_.]*)(\(.*\))?")


def test_every_module_and_name_the_architecture_map_gives_exists():
    """ARCHITECTURE.md says what the code does: each file or folder it names in backquotes
    exists, and so does each function, class or module it names (a name with an underscore, a
    dot or a capital inside: `project_change`, `ProjectChange.admit`, `fastsql.insert_pair`)."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    defined = _defined_names() | FRAMEWORK_NAMES
    product = ROOT / "memory_portal"
    bases = [ROOT, product, product / "memory", product / "memory" / "services"]
    missing = []
    for token in sorted(set(re.findall(r"`([^`\n]+)`", text))):
        if token.startswith("/") or " " in token:
            continue  # a URL, a request line
        if "/" in token or token.endswith(".py"):
            path = token.rstrip("/")
            found = any((base / path).exists() for base in bases)
            if not found and "/" not in path:
                found = any(product.rglob(path))  # a file named by itself: `actions.py`
            if not found:
                missing.append(token)
            continue
        match = CODE_NAME.fullmatch(token)
        if match is None:
            continue
        name = match.group(1)
        if "." not in name and "_" not in name and not re.search(r"[a-z][A-Z]", name):
            continue  # a plain word
        missing += [f"{token}: {part}" for part in name.split(".") if part not in defined]
    assert not missing


def test_the_name_checker_finds_a_name_that_is_gone():
    assert "project_change" in _defined_names()
    assert "lock_setting" not in _defined_names(), "the old lock helper is gone"


SECTION_REFERENCE = re.compile(r'docs/([A-Z]+\.md),\s+"([^"]+)"')
SOURCES = ["memory_portal", "bench", "tests", "faults", "fuzz", "templates"]


def headings(doc: Path) -> set[str]:
    return {
        line.lstrip("#").strip().replace("`", "")
        for line in doc.read_text().splitlines()
        if line.startswith("#")
    }


def test_every_section_a_reference_names_exists():
    """`(docs/RECALL.md, "Stored vectors")` in code, docs or configuration names a heading of that
    doc (a reference wrapped over two lines of a comment included)."""
    top_files = ("README.md", "Makefile", "pyproject.toml", "gunicorn.conf.py")
    files = [ROOT / name for name in top_files]
    files += sorted((ROOT / "docs").glob("*.md"))
    for top in SOURCES:
        files += sorted(p for p in (ROOT / top).rglob("*") if p.suffix in {".py", ".html"})
    missing = []
    for path in files:
        text = re.sub(r"\s*\n\s*(?:#\s*)?", " ", path.read_text())
        for doc, section in SECTION_REFERENCE.findall(text):
            section = section.replace("`", "")
            if not any(h.startswith(section) for h in headings(ROOT / "docs" / doc)):
                missing.append(f"{path.relative_to(ROOT)}: {doc}, {section!r}")
    assert not missing


@pytest.mark.parametrize("name", ["PERFORMANCE.md", "RECALL.md"])
def test_the_measurement_docs_stay_references(name):
    """How to run, today's figures and the decisions; the history of each figure is in git."""
    assert len((ROOT / "docs" / name).read_text().splitlines()) <= 260
