"""Read records over MCP (the official client, a live server): the same tools record the same
reads as over HTTP — a search, a read by id and the start prompt's recall."""

from __future__ import annotations

import pytest

from memory_portal.api import mcp_server
from memory_portal.memory import services
from memory_portal.memory.models import NoteRead, ReadTool

from .conftest import mcp_session, result_json, run_on_loop

pytestmark = pytest.mark.django_db(transaction=True)


def test_notes_served_over_mcp_are_recorded(mcp_url, run_tokens, world):
    note = services.fact_save(actor=world.as_agent, text="Use the blue deploy pipeline.").note

    async def go():
        async with mcp_session(mcp_url, run_tokens.writer) as client:
            found = result_json(await client.call_tool("memory_search", {"query": "deploy"}))
            read = result_json(await client.call_tool("memory_read", {"id": note.id}))
            prompt = await client.get_prompt(mcp_server.START_PROMPT)
            return found, read, prompt

    found, read, prompt = run_on_loop(go())
    assert [e["id"] for e in found["entries"]] == [note.id] == [e["id"] for e in read["entries"]]
    assert "Use the blue deploy pipeline." in prompt.messages[0].content.text
    rows = NoteRead.objects.filter(run=world.run).select_related("note").order_by("read_at")
    assert [(r.tool, r.note.id, r.rank) for r in rows] == [
        (ReadTool.SEARCH, note.id, 1),
        (ReadTool.READ, note.id, 1),
        (ReadTool.START_RECALL, note.id, 1),
    ]
