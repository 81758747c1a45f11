"""The repository's docs stand alone and stay true to the code: every relative link in README.md
and docs/*.md points at a file or folder of this repository, and the names the architecture map
gives in backquotes after a linked module exist in it."""

from __future__ import annotations

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


def test_the_architecture_walks_name_functions_that_exist():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    names = {
        "token_authenticate": "memory_portal/memory/tokens.py",
        "perform": "memory_portal/api/calls.py",
        "lock_and_bump": "memory_portal/memory/fastsql.py",
        "insert_pair": "memory_portal/memory/fastsql.py",
        "save_note_change": "memory_portal/memory/services/_common.py",
        "change_note": "memory_portal/memory/services/_common.py",
        "locked_note": "memory_portal/memory/services/_common.py",
        "_insert_locked": "memory_portal/memory/services/write.py",
        "note_veto": "memory_portal/memory/services/lifecycle.py",
        "note_write": "memory_portal/memory/services/notes.py",
        "refusal_edge": "memory_portal/dashboard/views/base.py",
        "project_action": "memory_portal/dashboard/views/base.py",
        "rows_response": "memory_portal/dashboard/views/base.py",
        "note_action": "memory_portal/dashboard/views/actions.py",
        "agent_visible_q": "memory_portal/memory/selectors/visibility.py",
    }
    for name, module in names.items():
        assert f"`{name}" in text or f"{name}`" in text, name
        source = (ROOT / module).read_text()
        assert re.search(rf"^(def|class)?\s*{name}\b|^{name} = ", source, re.M), (name, module)
