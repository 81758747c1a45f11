"""One list of audit actions (`AuditAction`): services record only its members, every member is
recorded somewhere, and the audit log's filter offers all of them."""

from __future__ import annotations

import ast
import io
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

import memory_portal
from memory_portal.memory.audit_actions import AuditAction
from memory_portal.memory.models import AuditEvent
from memory_portal.memory.services._common import audit_event

PACKAGE = Path(memory_portal.__file__).parent
DEFINITION = PACKAGE / "memory" / "audit_actions.py"
ACTIONS = set(AuditAction.values)


OUTBOX = PACKAGE / "memory" / "outbox.py"


def modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        # The outbox's event types are the spec's own names, one of which (`memory.reset`)
        # is spelled like the action it comes from.
        if "migrations" not in path.parts and path not in (DEFINITION, OUTBOX):
            yield path, ast.parse(path.read_text(encoding="utf-8"))


def test_no_action_is_spelled_as_a_string_outside_the_type():
    spelled = [
        f"{path.relative_to(PACKAGE)}:{node.lineno} {node.value!r}"
        for path, tree in modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in ACTIONS
    ]
    assert spelled == []


def test_every_action_of_the_type_is_recorded_by_some_code():
    used = {
        node.attr
        for _path, tree in modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "AuditAction"
    }
    assert set(AuditAction.names) - used == set()


def test_an_unknown_action_is_refused_before_it_is_recorded():
    with pytest.raises(ValueError):
        audit_event(actor=None, action="note.smudge", project=None)


@pytest.mark.django_db
def test_a_broad_scenario_records_only_known_actions(settings, tmp_path, admin_client):
    # The demo drives most services (writes, reviews, vetoes, forgets, restores, runs,
    # scratchpads, repositories, enable and disable) through their audited paths.
    settings.VAR_DIR = tmp_path
    call_command("memory_demo", stdout=io.StringIO())
    recorded = set(AuditEvent.objects.values_list("action", flat=True))
    assert len(recorded) > 25
    assert recorded <= ACTIONS

    page = admin_client.get(reverse("dashboard:audit")).content.decode()
    offered = {action for action in ACTIONS if f'<option value="{action}">' in page}
    assert offered == ACTIONS
