"""`manage.py memory_delete_project` and `memory_delete_application`: the operator's path to
the same services, acting as the system, with the id typed twice."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from memory_portal.memory import services
from memory_portal.memory.models import Agent, Application, AuditEvent, Note, Project

from .helpers import last_event


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.fixture
def scoped(world):
    return services.note_write(
        actor=world.as_agent, kind="fact", content="Storefront only", scope="application"
    ).note


def test_delete_an_application_prints_the_counts(world, scoped):
    out = run("memory_delete_application", "acme-web", "storefront", "--confirm", "storefront")
    lines = out.splitlines()
    assert lines[0] == "Deleted application acme-web/storefront:"
    assert "  notes: 1" in lines and "  agents_detached: 3" in lines
    assert "  notes_by_status: active 1, archived 0, forgotten 0" in lines
    assert not Note.objects.filter(pk=scoped.pk).exists()
    assert Agent.objects.get(pk=world.agent.pk).application is None
    event = last_event(world.project, "application.delete")
    assert event.actor_label == "system" and event.details["notes"] == 1


def test_delete_a_project_prints_the_counts(world, scoped):
    out = run("memory_delete_project", "acme-web", "--confirm", "acme-web")
    assert out.splitlines()[0] == "Deleted project acme-web:"
    assert "  notes: 1" in out.splitlines() and "  agents: 4" in out.splitlines()
    assert not Project.objects.filter(slug="acme-web").exists()
    event = AuditEvent.objects.get(action="project.delete")
    assert event.actor_label == "system" and event.project_ref == "acme-web"


@pytest.mark.parametrize(
    "args",
    [
        ("memory_delete_project", "acme-web", "--confirm", "acme"),
        ("memory_delete_project", "nope", "--confirm", "nope"),
        ("memory_delete_application", "acme-web", "storefront", "--confirm", "billing"),
        ("memory_delete_application", "acme-web", "nope", "--confirm", "nope"),
        ("memory_delete_application", "nope", "storefront", "--confirm", "storefront"),
    ],
)
def test_refusals_are_command_errors_and_delete_nothing(world, scoped, args):
    with pytest.raises(CommandError):
        run(*args)
    assert Application.objects.filter(pk=world.app.pk).exists()
    assert Note.objects.filter(pk=scoped.pk).exists()
    assert not AuditEvent.objects.filter(action__endswith=".delete").exists()


def test_the_confirmation_is_required(world):
    with pytest.raises(CommandError, match="--confirm"):
        run("memory_delete_project", "acme-web")
    assert Project.objects.filter(slug="acme-web").exists()
