"""`access.note_actions`: what a person may do to a note, the one rule the dashboard's rows
offer and the services enforce. For every state of a note and both roles, each verb offered
succeeds and changes the note, and each verb not offered is refused or changes nothing."""

from __future__ import annotations

import pytest
from django.db import transaction

from memory_portal.memory import services
from memory_portal.memory.access import allowed_actions, note_actions
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.models import MemorySetting, Note, Recovery

VERBS = (
    "approve", "reject", "unreview", "veto", "undo", "unarchive", "archive", "edit", "forget",
    "restore",
)  # fmt: skip


def note_states(world) -> dict[str, Note]:
    """One note in each state a row can show."""
    names = ("learned", "reviewed", "rejected", "archived", "superseded", "vetoed", "forgotten")
    notes = {
        name: services.note_write(actor=world.as_agent, kind="fact", content=f"A {name} note").note
        for name in names
    }
    m = world.as_manager
    services.note_approve(actor=m, note_id=notes["reviewed"].pk)
    services.note_reject(actor=m, note_id=notes["rejected"].pk)
    services.note_archive(actor=m, note_id=notes["archived"].pk, reason="done")
    services.note_edit(actor=m, note_id=notes["superseded"].pk, content="Its replacement")
    services.note_veto(actor=m, note_id=notes["vetoed"].pk)
    services.note_forget(actor=m, note_id=notes["forgotten"].pk)
    notes["day log"] = services.day_append(actor=world.as_agent, line="looked at the deploy")
    return {name: Note.objects.get(pk=note.pk) for name, note in notes.items()}


def _apply(actor, verb: str, note: Note):
    if verb == "restore":
        recovery = Recovery.objects.filter(note=note).first()
        if recovery is None:
            raise MemoryPortalError("memory_recovery_not_found", "No recovery.")
        return services.note_restore(actor=actor, recovery_id=recovery.pk)
    arguments = {"edit": {"content": "Said better"}, "archive": {"reason": "resting"}}
    return services.NOTE_VERBS[verb](actor=actor, note_id=note.pk, **arguments.get(verb, {}))


def _state(note_id: str, project) -> tuple:
    note = Note.objects.get(pk=note_id)
    revision = MemorySetting.objects.get(project=project).revision
    return (note.status, note.trust, note.archive_reason, note.superseded_by_id, revision)


@pytest.mark.parametrize("role", ["manager", "member"])
def test_every_verb_offered_works_and_every_other_is_refused_or_changes_nothing(world, role):
    actor = world.as_manager if role == "manager" else world.as_member
    for name, note in note_states(world).items():
        offered = note_actions(note, manager=role == "manager")
        assert offered == allowed_actions(actor, note), name
        for verb in VERBS:
            before = _state(note.pk, world.project)
            with transaction.atomic():
                try:
                    _apply(actor, verb, note)
                    refused = None
                except MemoryPortalError as err:
                    refused = err.code
                after = _state(note.pk, world.project)
                transaction.set_rollback(True)
            if verb in offered:
                assert refused is None, (role, name, verb, refused)
                assert after != before, (role, name, verb, "offered but changed nothing")
            else:
                assert refused is not None or after == before, (role, name, verb, "not offered")
