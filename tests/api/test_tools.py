"""The agent tools: definitions, every call, paging, the gate, the trace and the budget."""

from __future__ import annotations

import jsonschema
import pytest

from memory_portal.memory import services
from memory_portal.memory.models import Note, ScratchpadItem, ToolCallCount

from .conftest import error_code

LESSON = {
    "kind": "lesson",
    "target": "long_term",
    "content": "The legacy export has duplicate headings; compare column positions first.",
    "tags": ["exports", "data-quality"],
}


def test_tool_definitions_are_valid_json_schema(api, tokens):
    response = api.get("/api/tools", tokens.agent)
    assert response.status_code == 200
    body = response.json()
    assert body["enabled"] and body["eligible"] and body["accessMode"] == "learned"
    names = [t["name"] for t in body["tools"]]
    assert names == [
        "memory_write",
        "memory_read",
        "memory_search",
        "memory_status",
        "memory_forget",
        "memory_restore",
        "scratchpad",
    ]
    for tool in body["tools"]:
        jsonschema.Draft202012Validator.check_schema(tool["parameters"])
        assert "$ref" not in str(tool["parameters"]) and tool["description"]
    write = next(t for t in body["tools"] if t["name"] == "memory_write")
    jsonschema.validate(LESSON, write["parameters"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**LESSON, "trust": "reviewed"}, write["parameters"])


def test_tools_offered_by_caller(api, tokens, world):
    reviewer = api.get("/api/tools", tokens.reviewer).json()
    assert [t["name"] for t in reviewer["tools"]] == [
        "memory_read",
        "memory_search",
        "memory_status",
    ]
    assert reviewer["accessMode"] == "reviewed"
    readonly = api.get("/api/tools", tokens.agent_readonly).json()
    assert [t["name"] for t in readonly["tools"]] == [
        "memory_read",
        "memory_search",
        "memory_status",
    ]
    ineligible = api.get("/api/tools", tokens.implementer).json()
    assert ineligible["tools"] == [] and ineligible["eligible"] is False
    services.memory_disable(actor=world.as_manager, project=world.project)
    disabled = api.get("/api/tools", tokens.agent).json()
    assert disabled == {"enabled": False, "eligible": True, "accessMode": "learned", "tools": []}
    assert error_code(api.get("/api/tools", tokens.manager)) == "memory_tool_forbidden"


def test_write_read_search_status(api, tokens):
    response = api.tool("memory_write", tokens.agent, LESSON)
    assert response.status_code == 200, response.content
    written = response.json()
    assert written["trust"] == "learned" and written["created"] is True
    again = api.tool("memory_write", tokens.agent2, LESSON).json()
    assert again == {**written, "created": False}
    read = api.tool("memory_read", tokens.agent, {"id": written["id"]}).json()
    entry = read["entries"][0]
    assert read["nextOffset"] is None
    assert entry["id"] == written["id"] and entry["content"] == LESSON["content"]
    assert entry["createdByStage"] == "runtime" and entry["producerStatus"] == "running"
    assert entry["taskKey"] == "PIN-42" and entry["originRunId"].startswith("run_")
    assert entry["tags"] == ["exports", "data-quality"] and entry["evidence"] is None
    found = api.tool("memory_search", tokens.agent2, {"query": "duplicate headings"}).json()
    assert [e["id"] for e in found["entries"]] == [written["id"]]
    status = api.tool("memory_status", tokens.agent, {}).json()
    assert status["enabled"] and status["noteCount"] == 1 and status["accessMode"] == "learned"
    assert len(status["fingerprint"]) == 32 and status["revision"] > 0


def test_daily_notes_and_date_list(api, tokens):
    api.tool(
        "memory_write",
        tokens.agent,
        {"kind": "fact", "target": "daily", "scope": "application", "content": "Mapped accounts."},
    )
    api.tool(
        "memory_write",
        tokens.agent,
        {"kind": "fact", "target": "daily", "date": "2026-10-25", "content": "Older day."},
    )
    today = api.tool("memory_read", tokens.agent, {"target": "daily"}).json()
    assert [e["content"] for e in today["entries"]] == ["Mapped accounts."]
    old = api.tool("memory_read", tokens.agent, {"target": "daily", "date": "2026-10-25"}).json()
    assert old["entries"][0]["day"] == "2026-10-25"
    dates = api.tool("memory_read", tokens.agent, {"target": "list"}).json()
    assert [d["date"] for d in dates["dates"]][-1] == "2026-10-25"
    assert all(d["count"] == 1 for d in dates["dates"])


def test_pages_hold_one_to_five_entries_and_continue(api, tokens):
    for i in range(7):
        api.tool("memory_write", tokens.agent, {"kind": "fact", "content": f"Fact number {i}"})
    first = api.tool("memory_read", tokens.agent, {"target": "long_term", "limit": 5}).json()
    assert len(first["entries"]) == 5 and first["nextOffset"] == 5
    rest = api.tool("memory_read", tokens.agent, {"target": "long_term", "offset": 5}).json()
    assert len(rest["entries"]) == 2 and rest["nextOffset"] is None
    for bad in ({"limit": 0}, {"limit": 6}, {"offset": -1}):
        response = api.tool("memory_read", tokens.agent, {"target": "long_term", **bad})
        assert error_code(response) == "memory_invalid"


def test_pages_stay_within_12000_bytes(api, tokens):
    for i in range(5):
        content = f"{i} " + "é" * 1990  # ~4 KB of JSON each
        api.tool("memory_write", tokens.agent, {"kind": "fact", "content": content})
    page = api.tool("memory_read", tokens.agent, {"target": "long_term", "limit": 5})
    assert len(page.content) <= 12_000
    body = page.json()
    assert 1 <= len(body["entries"]) < 5 and body["nextOffset"] == len(body["entries"])


def test_forget_restore_and_recoveries(api, tokens):
    note_id = api.tool("memory_write", tokens.agent, LESSON).json()["id"]
    forgotten = api.tool("memory_forget", tokens.agent, {"id": note_id}).json()
    assert forgotten["id"] == note_id and forgotten["recoveryId"].startswith("rec_")
    assert error_code(api.tool("memory_read", tokens.agent, {"id": note_id})) == "memory_not_found"
    recoveries = api.tool("memory_read", tokens.agent, {"target": "recoveries"}).json()
    assert [r["recoveryId"] for r in recoveries["entries"]] == [forgotten["recoveryId"]]
    restored = api.tool("memory_restore", tokens.agent, {"recoveryId": forgotten["recoveryId"]})
    assert restored.json() == {"id": note_id, "status": "active"}
    again = api.tool("memory_restore", tokens.agent, {"recoveryId": forgotten["recoveryId"]})
    assert again.status_code == 404 and error_code(again) == "memory_recovery_not_found"


def test_scratchpad(api, tokens):
    item = api.tool("scratchpad", tokens.agent, {"action": "add", "text": "check totals"}).json()
    assert item["itemId"].startswith("itm_")
    done = api.tool("scratchpad", tokens.agent, {"action": "done", "itemId": item["itemId"]})
    assert done.json()["done"] is True
    listed = api.tool("scratchpad", tokens.agent, {"action": "list"}).json()
    assert listed["items"] == [{"itemId": item["itemId"], "text": "check totals", "done": True}]
    assert api.tool("scratchpad", tokens.agent, {"action": "clear"}).json()["removed"] == 1
    missing = api.tool("scratchpad", tokens.agent, {"action": "undo", "itemId": "itm_nope"})
    assert missing.status_code == 404 and error_code(missing) == "scratchpad_item_not_found"
    assert error_code(api.tool("scratchpad", tokens.agent, {"action": "done"})) == "memory_invalid"


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"action": "add"}, "text"),
        ({"action": "add", "text": "t", "itemId": "itm_x"}, "itemId"),
        ({"action": "done"}, "itemId"),
        ({"action": "undo"}, "itemId"),
        ({"action": "clear", "limit": 5}, "limit"),
        ({"action": "add", "text": "t", "offset": 0}, "offset"),
    ],
)
def test_scratchpad_arguments_that_do_not_go_with_the_action_are_refused(
    api, tokens, world, arguments, field
):
    """Which arguments go with which action is the schema's rule: a 400 naming the field,
    nothing changed, and the call traced as memory_invalid."""
    answer = api.tool("scratchpad", tokens.agent, arguments)
    assert answer.status_code == 400 and error_code(answer) == "memory_invalid"
    assert answer.json()["error"]["field"] == field
    assert not ScratchpadItem.objects.exists()
    traced = ToolCallCount.objects.filter(run=world.run, tool="scratchpad")
    assert traced.get(outcome="memory_invalid").count == 1


@pytest.mark.parametrize(
    ("arguments", "field", "message"),
    [
        ({"id": "mem_x", "target": "daily"}, "target", "either id or target"),
        ({"date": "2026-03-02"}, "date", "date applies to target daily"),
        ({"target": "long_term", "date": "2026-03-02"}, "date", "date applies to target daily"),
    ],
)
def test_memory_read_arguments_that_do_not_go_together_are_refused(
    api, tokens, world, arguments, field, message
):
    """The schema's rule, as for the scratchpad: a 400 naming the field, traced once."""
    answer = api.tool("memory_read", tokens.agent, arguments)
    assert answer.status_code == 400 and error_code(answer) == "memory_invalid"
    error = answer.json()["error"]
    assert error["field"] == field and message in error["message"], error
    traced = ToolCallCount.objects.filter(run=world.run, tool="read")
    assert traced.get(outcome="memory_invalid").count == 1


def test_memory_read_takes_a_date_with_a_daily_target_or_an_id(api, tokens, world):
    daily = api.tool("memory_read", tokens.agent, {"target": "daily", "date": "2026-03-02"})
    assert daily.status_code == 200 and daily.json()["entries"] == []
    dates = api.tool("memory_read", tokens.agent, {"target": "list", "date": "2026-03-02"})
    assert dates.status_code == 200, "list ignores a date, as it always did"


def test_scratchpad_list_pages_within_the_reply_ceiling(api, tokens, world):
    texts = [f"item {i:03d} " + "x" * 990 for i in range(100)]
    for text in texts:
        assert (
            api.tool("scratchpad", tokens.agent, {"action": "add", "text": text}).status_code == 200
        )
    seen, offset, pages = [], 0, 0
    while offset is not None:
        response = api.tool("scratchpad", tokens.agent, {"action": "list", "offset": offset})
        assert response.status_code == 200 and len(response.content) <= 12_000
        body = response.json()
        assert body["items"], "every page but none holds something"
        seen += [item["text"] for item in body["items"]]
        offset, pages = body["nextOffset"], pages + 1
    assert seen == texts and pages >= 9
    small = api.tool("scratchpad", tokens.agent, {"action": "list", "limit": 3}).json()
    assert len(small["items"]) == 3 and small["nextOffset"] == 3
    wrong = api.tool("scratchpad", tokens.agent, {"action": "clear", "offset": 3})
    assert wrong.status_code == 400 and error_code(wrong) == "memory_invalid"


@pytest.mark.parametrize("field", ["project", "application", "run", "author", "trust", "extra"])
def test_model_cannot_supply_bound_fields(api, tokens, field):
    response = api.tool("memory_write", tokens.agent, {**LESSON, field: "x"})
    assert response.status_code == 400
    body = response.json()["error"]
    assert body["code"] == "memory_invalid" and body["field"] == field
    assert not Note.objects.exists()


@pytest.mark.parametrize(
    ("token", "tool", "body", "status", "code"),
    [
        ("reviewer", "memory_write", LESSON, 403, "memory_tool_forbidden"),
        ("reviewer", "scratchpad", {"action": "list"}, 403, "memory_tool_forbidden"),
        ("agent_readonly", "memory_write", LESSON, 403, "memory_tool_forbidden"),
        ("agent_readonly", "memory_forget", {"id": "mem_x"}, 403, "memory_tool_forbidden"),
        ("implementer", "memory_read", {}, 403, "memory_not_eligible"),
        ("member", "memory_status", {}, 403, "memory_tool_forbidden"),
        ("agent", "memory_read", {"id": "mem_missing"}, 404, "memory_not_found"),
        ("agent", "memory_write", {"kind": "fact", "content": ""}, 400, "memory_invalid"),
        ("agent", "memory_write", {"kind": "fact", "content": "x" * 2001}, 400, "memory_invalid"),
        (
            "agent",
            "memory_write",
            {"kind": "fact", "content": "😀" * 2000, "summary": "s"},
            413,
            "memory_payload_too_large",
        ),
        (
            "agent",
            "memory_write",
            {"kind": "fact", "content": "Deploy with password=Tr0ub4dor&3xyz"},
            400,
            "secret_in_memory",
        ),
        (
            "agent",
            "memory_write",
            {"kind": "fact", "content": "Cited", "evidence": {"repositoryId": "x", "path": "a"}},
            400,
            "memory_evidence_invalid",
        ),
        ("agent", "memory_restore", {"recoveryId": "rec_x"}, 404, "memory_recovery_not_found"),
    ],
)
def test_tool_refusals(api, tokens, token, tool, body, status, code):
    response = api.tool(tool, getattr(tokens, token), body)
    assert response.status_code == status, response.content
    assert error_code(response) == code
    assert "Tr0ub4dor" not in response.content.decode()


def test_disabled_memory_answers_every_call(api, tokens, world):
    services.memory_disable(actor=world.as_manager, project=world.project)
    for tool, body in [("memory_status", {}), ("memory_read", {}), ("memory_write", LESSON)]:
        response = api.tool(tool, tokens.agent, body)
        assert response.status_code == 403 and error_code(response) == "memory_disabled"


def test_trust_locked_and_reviewer_view(api, tokens, world):
    note_id = api.tool("memory_write", tokens.agent, LESSON).json()["id"]
    assert api.tool("memory_read", tokens.reviewer, {"id": note_id}).status_code == 404
    services.note_approve(actor=world.as_manager, note_id=note_id)
    forget = api.tool("memory_forget", tokens.agent, {"id": note_id})
    assert forget.status_code == 403 and error_code(forget) == "memory_trust_locked"
    assert api.tool("memory_read", tokens.reviewer, {"id": note_id}).json()["entries"][0][
        "trust"
    ] == ("reviewed")


def test_every_call_is_traced_by_tool_and_outcome(api, tokens, world):
    api.tool("memory_write", tokens.agent, LESSON)
    api.tool("memory_write", tokens.agent, {**LESSON, "trust": "reviewed"})
    api.tool("memory_read", tokens.agent, {"id": "mem_missing"})
    api.tool("memory_status", tokens.agent, {})
    counts = {(c.tool, c.outcome): c.count for c in ToolCallCount.objects.filter(run=world.run)}
    assert counts == {
        ("write", "ok"): 1,
        ("write", "memory_invalid"): 1,
        ("read", "memory_not_found"): 1,
        ("status", "ok"): 1,
    }
    world.run.refresh_from_db()
    assert world.run.tool_calls == 4


def test_call_budget(api, tokens, world, settings):
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "RUN_CALL_BUDGET": 2}
    assert api.tool("memory_status", tokens.agent, {}).status_code == 200
    assert api.tool("memory_status", tokens.agent, {}).status_code == 200
    third = api.tool("memory_status", tokens.agent, {})
    assert third.status_code == 429 and error_code(third) == "memory_call_budget"
    assert "at most 2 memory calls" in third.json()["error"]["hint"], "the configured limit"
    assert ToolCallCount.objects.get(run=world.run, outcome="memory_call_budget").count == 1


def test_run_quota_over_http(api, tokens, settings):
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "RUN_NOTE_QUOTA": 1}
    api.tool("memory_write", tokens.agent, {"kind": "fact", "content": "one"})
    response = api.tool("memory_write", tokens.agent, {"kind": "fact", "content": "two"})
    assert response.status_code == 429 and error_code(response) == "memory_run_quota"
    assert "at most 1 new notes" in response.json()["error"]["hint"], "the configured limit"


def test_refused_write_of_forgotten_content(api, tokens):
    note_id = api.tool("memory_write", tokens.agent, LESSON).json()["id"]
    api.tool("memory_forget", tokens.agent, {"id": note_id})
    response = api.tool("memory_write", tokens.agent, LESSON)
    assert response.status_code == 409 and error_code(response) == "memory_forgotten"


@pytest.mark.parametrize("case", ["project_full", "rejected", "vetoed", "scratchpad_full"])
def test_remaining_refusal_codes_over_http(api, tokens, world, settings, case):
    expected = {
        "project_full": (409, "memory_project_full"),
        "rejected": (409, "memory_rejected"),
        "vetoed": (409, "memory_vetoed"),
        "scratchpad_full": (409, "scratchpad_full"),
    }[case]
    if case == "project_full":
        settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "PROJECT_NOTE_CAP": 1}
        api.tool("memory_write", tokens.agent, {"kind": "fact", "content": "one"})
        response = api.tool("memory_write", tokens.agent2, {"kind": "fact", "content": "two"})
    elif case == "scratchpad_full":
        for i in range(100):
            api.tool("scratchpad", tokens.agent, {"action": "add", "text": f"item {i}"})
        response = api.tool("scratchpad", tokens.agent, {"action": "add", "text": "one more"})
    else:
        note_id = api.tool("memory_write", tokens.agent, LESSON).json()["id"]
        if case == "rejected":
            services.note_reject(actor=world.as_manager, note_id=note_id)
        else:
            services.note_veto(actor=world.as_member, note_id=note_id)
        response = api.tool("memory_write", tokens.agent2, LESSON)
    assert (response.status_code, error_code(response)) == expected
    if case == "project_full":
        hint = response.json()["error"]["hint"]
        assert "forgotten" in hint and "reset" in hint and "Forget" not in hint


def test_the_list_of_daily_dates_is_one_query_however_many_dates(api, tokens, world):
    from datetime import timedelta

    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    today = timezone.now().date()

    def queries_for_list() -> tuple[int, dict]:
        with CaptureQueriesContext(connection) as captured:
            body = api.tool("memory_read", tokens.agent, {"target": "list"}).json()
        return len(captured), body

    def daily(offset_days: int, text: str) -> None:
        day = (today - timedelta(days=offset_days)).isoformat()
        args = {"kind": "fact", "target": "daily", "date": day, "content": text}
        assert api.tool("memory_write", tokens.agent, args).status_code == 200

    daily(0, "Today's note")
    queries_for_list()  # the first read call of the run also creates its trace row
    few, _ = queries_for_list()
    for i in range(1, 5):
        daily(i, f"Note of day {i}")
        daily(i, f"Second note of day {i}")
    many, body = queries_for_list()
    assert many == few, "no query per date"
    assert [d["count"] for d in body["dates"]] == [1, 2, 2, 2, 2]
    assert body["nextOffset"] is None


def test_read_and_search_by_tag(api, tokens):
    """`tag` narrows a list and a search to the notes carrying it (case-insensitive)."""
    tagged = api.tool("memory_write", tokens.agent, LESSON).json()["id"]
    other = {
        **LESSON,
        "content": "Duplicate headings also appear in the invoice export.",
        "tags": ["invoices"],
    }
    untagged = api.tool("memory_write", tokens.agent, other).json()["id"]
    listed = api.tool("memory_read", tokens.agent, {"tag": "Exports"}).json()
    assert [e["id"] for e in listed["entries"]] == [tagged]
    found = api.tool(
        "memory_search", tokens.agent, {"query": "duplicate headings", "tag": "invoices"}
    ).json()
    assert [e["id"] for e in found["entries"]] == [untagged]
    assert api.tool("memory_read", tokens.agent, {"tag": "nothing-here"}).json()["entries"] == []
    too_long = api.tool("memory_read", tokens.agent, {"tag": "x" * 33})
    assert too_long.status_code == 400 and too_long.json()["error"]["field"] == "tag"
