"""Refusals say what is true here: the configured limits, the role that can act, and no
approval of a note that is forgotten."""

from __future__ import annotations

import pytest

from memory_portal.memory import services
from memory_portal.memory.errors import CODES, MemoryPortalError
from memory_portal.memory.models import Note, Trust


def test_a_forgotten_note_is_not_approved(world):
    note = services.note_write(actor=world.as_agent, kind="fact", content="Port 8080.").note
    services.note_forget(actor=world.as_manager, note_id=note.pk)
    with pytest.raises(MemoryPortalError) as info:
        services.note_approve(actor=world.as_manager, note_id=note.pk)
    assert info.value.code == "memory_forgotten" and "Restore" in info.value.hint
    assert Note.objects.get(pk=note.pk).trust == Trust.LEARNED


def test_administrator_only_refusals_name_an_administrator(world):
    with pytest.raises(MemoryPortalError) as info:
        services.project_create(actor=world.as_manager, slug="other", name="Other")
    assert info.value.code == "memory_forbidden"
    assert "administrator" in info.value.hint and "project manager" not in info.value.hint


def test_no_default_hint_states_a_limit_that_can_be_configured():
    for code in ("memory_run_quota", "memory_call_budget"):
        assert not any(ch.isdigit() for ch in CODES[code].hint), CODES[code].hint


def test_a_known_token_id_with_a_wrong_secret_costs_what_an_unknown_id_does(world):
    """Both run the same one statement, find no row and build nothing: timing cannot tell a
    known prefix apart."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from memory_portal.memory.tokens import token_authenticate

    raw = services.token_create(actor=None, run=world.run)[1]
    prefix = raw.split("_")[1]
    answers = []
    for bearer in (f"mp_{prefix}_{'x' * 43}", f"mp_{'a' * 12}_{'x' * 43}"):
        with CaptureQueriesContext(connection) as queries, pytest.raises(MemoryPortalError) as e:
            token_authenticate(bearer)
        answers.append((e.value.code, e.value.message, [q["sql"].split("WHERE")[0] for q in
                                                           queries.captured_queries]))  # fmt: skip
    assert answers[0] == answers[1] and len(answers[0][2]) == 1
    assert token_authenticate(raw).run_id == world.run.pk
