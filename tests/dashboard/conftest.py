"""Dashboard fixtures: the `world` personas with logged-in clients and a few notes written
through the services (never straight into the tables)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from memory_portal.memory import services
from memory_portal.memory.actors import Actor
from memory_portal.memory.models import Note

HTMX = {"HTTP_HX_REQUEST": "true"}


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def manager_client(world):
    return client_for(world.manager)


@pytest.fixture
def member_client(world):
    return client_for(world.member)


@pytest.fixture
def outsider_client(world):
    return client_for(world.outsider)


def write_note(world, content: str, **kwargs) -> Note:
    """A learned note written by the runtime agent, as the tool path writes it (in `step`, when
    given, as the orchestrator reports it)."""
    kwargs.setdefault("kind", "fact")
    step = kwargs.pop("step", None)
    if step is not None and world.run.current_step != step:
        world.run.current_step = services.run_update(
            actor=None, run=world.run, step=step
        ).current_step
    return services.note_write(actor=world.as_agent, content=content, **kwargs).note


def save_fact(world, text: str, **kwargs) -> Note:
    """A fact a person saves for the runtime agent (scope agent, 90-day expiry)."""
    return services.fact_save(
        actor=world.as_manager, agent_id=world.agent.pk, text=text, **kwargs
    ).note


def write_notes(world, count: int, prefix: str = "Note") -> list[Note]:
    return [write_note(world, f"{prefix} number {i} about the deploy") for i in range(count)]


def day_log_yesterday(world, lines: list[str]) -> Note:
    """Append day lines as the agent, then move the row to yesterday the way time would."""
    row = None
    for line in lines:
        row = services.day_append(actor=world.as_agent, line=line)
    yesterday = timezone.now().date() - timedelta(days=1)
    from memory_portal.memory.validation import day_row_identity

    # Time travel is test set-up, not a state change the product makes.
    Note.objects.filter(pk=row.pk).update(
        day=yesterday,
        place_key=day_row_identity(owner_agent_id=world.agent.pk, day=yesterday),
    )
    row.refresh_from_db()
    return row


def as_person(user) -> Actor:
    return Actor.person(user)
