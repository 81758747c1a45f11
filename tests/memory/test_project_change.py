"""`project_change` (services/change.py), the one unit of work for a change to a project: no
other code locks or writes the project's setting row; one change advances the revision once;
a change within another shares its lock and rolls back alone; an idempotent repeat leaves
nothing behind, the lock's advance included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory_portal.memory import counters, services
from memory_portal.memory.audit_actions import AuditAction
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.models import AuditEvent, MemorySetting, Note, Status

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ROOT / "memory_portal"
CHANGE = PRODUCT / "memory" / "services" / "change.py"
FASTSQL = PRODUCT / "memory" / "fastsql.py"
# The demo backdates its projects' timestamps after loading them, outside any change.
DEMO = PRODUCT / "memory" / "demo"


def _calls(path: Path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            yield node


def _chain(node: ast.AST) -> list[str]:
    """The names along a call chain: MemorySetting.objects.filter(…).update → [MemorySetting,
    objects, filter, update]."""
    names: list[str] = []
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Name):
            names.append(node.id)
            return names[::-1]
        else:
            return names[::-1]


def test_only_project_change_locks_or_writes_the_setting_row():
    """Every lock of a project's setting row, and every change to it, goes through
    `project_change`: an ORM lock or update of MemorySetting, or the hand-built lock, anywhere
    else in the product fails this test."""
    offenders = []
    for path in sorted(PRODUCT.rglob("*.py")):
        if "migrations" in path.parts or path == CHANGE or DEMO in path.parents:
            continue
        for call in _calls(path):
            chain = _chain(call)
            where = f"{path.relative_to(ROOT)}:{call.lineno}"
            if chain[:1] == ["MemorySetting"] and {"select_for_update", "update"} & set(chain):
                offenders.append(f"{where} {'.'.join(chain)}")
            if chain[-1:] == ["lock_and_bump"]:
                offenders.append(f"{where} lock_and_bump")
    for path in sorted(PRODUCT.rglob("*.py")):
        if path == FASTSQL or "migrations" in path.parts:
            continue
        text = path.read_text()
        if "project_memory_setting" in text and ("FOR UPDATE" in text or "UPDATE project" in text):
            offenders.append(f"{path.relative_to(ROOT)}: SQL on the setting row")
    assert not offenders


def test_the_checker_sees_a_lock_taken_another_way(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def f(p):\n"
        "    MemorySetting.objects.select_for_update().filter(project=p).first()\n"
        "    MemorySetting.objects.filter(project=p).update(revision=1)\n"
        "    fastsql.lock_and_bump(p.pk, now=None)\n"
    )
    chains = [_chain(call) for call in _calls(sample)]
    assert ["MemorySetting", "objects", "select_for_update", "filter", "first"] in chains
    assert ["MemorySetting", "objects", "filter", "update"] in chains
    assert ["fastsql", "lock_and_bump"] in chains


def revision(world) -> int:
    return MemorySetting.objects.get(project=world.project).revision


def note(world, content: str) -> Note:
    return services.note_write(actor=world.as_agent, kind="fact", content=content).note


def test_one_change_advances_the_revision_once_with_its_counters_in_one_update(world):
    a, b = note(world, "First of two"), note(world, "Second of two")
    before = revision(world)
    with (
        CaptureQueriesContext(connection) as queries,
        services.project_change(world.project, actor=world.as_manager) as change,
    ):
        for n in (a, b):
            services.note_veto(actor=world.as_manager, note_id=n.pk, within=change)
    assert revision(world) == before + 1
    updates = [q["sql"] for q in queries if q["sql"].startswith('UPDATE "project_memory_setting"')]
    assert len(updates) == 1, updates
    stored = MemorySetting.objects.values(*counters.FIELDS).get(project=world.project)
    assert stored == counters.recounted(world.project.pk)


def test_a_failed_change_within_another_rolls_back_alone(world):
    kept, refused = note(world, "Vetoed in the outer change"), note(world, "Never vetoed")
    services.note_forget(actor=world.as_manager, note_id=refused.pk)
    with services.project_change(world.project, actor=world.as_manager) as change:
        services.note_veto(actor=world.as_manager, note_id=kept.pk, within=change)
        with pytest.raises(MemoryPortalError):
            services.note_veto(actor=world.as_manager, note_id=refused.pk, within=change)
    assert Note.objects.get(pk=kept.pk).is_vetoed
    assert Note.objects.get(pk=refused.pk).status == Status.FORGOTTEN
    stored = MemorySetting.objects.values(*counters.FIELDS).get(project=world.project)
    assert stored == counters.recounted(world.project.pk), "the refused veto moved no counter"


def test_a_change_within_another_project_is_refused(world, make_user):
    from tests.conftest import build_world

    other = build_world(make_user, slug="other-project")
    with (
        services.project_change(world.project, actor=world.as_manager) as change,
        pytest.raises(AssertionError),
        services.project_change(other.project, actor=other.as_manager, within=change),
    ):
        pass


def test_an_idempotent_write_leaves_no_trace_of_its_lock(world):
    first = note(world, "Written once")
    before = revision(world)
    events = AuditEvent.objects.count()
    again = services.note_write(actor=world.as_agent, kind="fact", content="Written once")
    assert not again.created and again.note.pk == first.pk
    assert revision(world) == before, "the lock's revision advance was rolled back"
    assert AuditEvent.objects.count() == events


def test_a_change_audits_with_its_own_details(world):
    with services.project_change(
        world.project, actor=world.as_manager, audit_details={"revert": "rvt_x"}
    ) as change:
        event = change.audit(AuditAction.MEMORY_ENABLE, details={"extra": 1})
    assert event.details == {"revert": "rvt_x", "extra": 1}
    assert event.actor_label == world.manager.get_username()


def test_a_change_refuses_a_stale_epoch(world):
    epoch = MemorySetting.objects.get(project=world.project).revocation_epoch
    services.memory_disable(actor=world.as_manager, project=world.project)
    with (
        pytest.raises(MemoryPortalError) as info,
        services.project_change(world.project, actor=world.as_agent, epoch=epoch),
    ):
        pass
    assert info.value.code == "memory_write_revoked"
