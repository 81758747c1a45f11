"""Assertions shared by the service tests."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.models import AuditEvent, MemorySetting, Note, Recovery, ScratchpadItem


def snapshot(project) -> dict:
    setting = MemorySetting.objects.get(project=project)
    return {
        "notes": list(
            Note.objects.filter(project=project)
            .order_by("id")
            .values_list("id", "status", "trust", "content", "archive_reason")
        ),
        "recoveries": Recovery.objects.filter(project=project).count(),
        "scratchpad": ScratchpadItem.objects.filter(project=project).count(),
        "revision": setting.revision,
        "epoch": setting.revocation_epoch,
        "enabled": setting.enabled,
        "audit": AuditEvent.objects.filter(project=project).count(),
    }


@contextmanager
def refused(code: str, project, *, field: str | None = None):
    """The block must raise `code` and leave the project exactly as it was."""
    before = snapshot(project)
    with pytest.raises(MemoryPortalError) as info:
        yield info
    assert info.value.code == code, f"expected {code}, got {info.value.code}: {info.value.message}"
    assert info.value.hint, "every refusal says what to do next"
    if field is not None:
        assert info.value.field == field
    assert snapshot(project) == before, "a refused call changed something"


def last_event(project, action: str | None = None) -> AuditEvent:
    events = AuditEvent.objects.filter(project=project)
    if action:
        events = events.filter(action=action)
    event = events.order_by("-id").first()
    assert event is not None, f"no audit event {action}"
    return event
