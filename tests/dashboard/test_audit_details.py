"""The audit log's details read as words, not Python reprs."""

from __future__ import annotations

from memory_portal.dashboard.templatetags.audit_details import readable_details
from memory_portal.memory import services

from .conftest import write_note


def test_details_are_written_out():
    details = {
        "restored": 4,
        "by_status": {"active": 2, "archived": 1},
        "ids": [f"mem_{i}" for i in range(7)],
        "was_vetoed": True,
        "reason": None,
    }
    assert readable_details(details) == [
        ("restored", "4"),
        ("by status", "active 2, archived 1"),
        ("ids", "mem_0, mem_1, mem_2, mem_3, mem_4 and 2 more"),
        ("was vetoed", "yes"),
        ("reason", "—"),
    ]
    assert readable_details({}) == []


def test_the_audit_page_shows_no_repr(world, manager_client):
    note = write_note(world, "Audited")
    services.note_veto(actor=world.as_member, note_id=note.pk)
    services.note_undo(actor=world.as_member, note_id=note.pk)
    html = manager_client.get("/audit/?project=acme-web").content.decode()
    assert "was vetoed</span> yes" in html
    assert "{'" not in html and "True" not in html
