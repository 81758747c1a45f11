"""Work a JSON API call leaves for after its answer (api/after_answer.py): the trace row of a
call that ended well, with its slot's give-back. Driven through Django's WSGI handler as a
server drives it — the answer is complete before the server closes it, and the work runs at
that close; a failure there is logged and changes nothing that was answered."""

from __future__ import annotations

import json
import logging

import psycopg
import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.db import connection
from django.test import RequestFactory

from memory_portal.api import calls, tracing
from memory_portal.api.tools import TOOLS_BY_NAME
from memory_portal.memory.actors import Actor
from memory_portal.memory.models import RunSlot, ToolCallCount

from .test_failures import wrapped

pytestmark = pytest.mark.django_db(transaction=True)


def _served(token: str, tool: str, body: dict):
    """The handler's answer before the server has closed it, as gunicorn holds it while it
    writes the body out."""
    request = RequestFactory().post(
        f"/api/tools/{tool}",
        json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    started = []
    response = WSGIHandler()(request.environ, lambda status, headers: started.append(status))
    return response, started


def _traced(run) -> dict:
    return {(c.tool, c.outcome): c.count for c in ToolCallCount.objects.filter(run=run)}


def test_a_calls_trace_row_and_slot_go_after_its_answer_is_complete(tokens, world):
    response, started = _served(tokens.agent, "memory_status", {})
    assert started == ["200 OK"] and json.loads(b"".join(response))["noteCount"] == 0
    assert _traced(world.run) == {}, "written before the answer left"
    if connection.vendor == "postgresql":
        assert RunSlot.objects.filter(run_id=world.run.top_level_run_id).count() == 1
    response.close()  # the server has written the answer out
    assert _traced(world.run) == {("status", "ok"): 1}
    assert not RunSlot.objects.exists(), "the slot went back with the trace row"
    world.run.refresh_from_db()
    assert world.run.tool_calls == 1, "taken from the budget once, before the answer"


def test_a_refusal_and_a_write_are_traced_before_their_answer(tokens, world):
    """A refusal's code and a write's `ok` (counted in its own transaction) are answered
    with their trace rows already written: only a call whose outcome nothing can change
    leaves its row for later."""
    refused, _ = _served(tokens.agent, "memory_read", {"id": "mem_missing"})
    assert json.loads(b"".join(refused))["error"]["code"] == "memory_not_found"
    written, _ = _served(tokens.agent, "memory_write", {"kind": "fact", "content": "Kept"})
    assert json.loads(b"".join(written))["created"] is True
    assert _traced(world.run) == {("read", "memory_not_found"): 1, ("write", "ok"): 1}
    refused.close()
    written.close()


def test_a_failure_after_the_answer_is_logged_and_the_answer_stands(
    tokens, world, monkeypatch, caplog
):
    def lost(**kwargs):
        raise wrapped(psycopg.OperationalError("server closed the connection"))

    monkeypatch.setattr(tracing.services, "tool_call_record", lost)
    response, started = _served(tokens.agent, "memory_status", {})
    assert started == ["200 OK"]
    with caplog.at_level(logging.ERROR, logger="memory_portal.api"):
        response.close()
    assert "work left for after an answer failed" in caplog.text
    assert _traced(world.run) == {}
    monkeypatch.undo()
    again, started = _served(tokens.agent, "memory_status", {})  # another slot, or none held
    assert started == ["200 OK"]
    again.close()
    assert _traced(world.run) == {("status", "ok"): 1}


def test_outside_an_api_request_the_trace_row_is_written_at_once(world):
    """A call made by another transport (MCP runs them on its request's thread, answers
    streamed) or by code of the product: nothing waits for a close."""
    calls.perform(
        TOOLS_BY_NAME["memory_status"], actor=Actor.agent_run(world.run), arguments={},
        transport=calls.MCP,
    )  # fmt: skip
    assert _traced(world.run) == {("mcp:status", "ok"): 1}
