"""`Client` and `AsyncClient` against a live server: the tools, v1, runs and keys, a project's
memory for people, export and import, and refusals as `MemoryPortalError`."""

from __future__ import annotations

import socket

import httpx
import pytest
from memory_portal_client import (
    AsyncClient,
    Client,
    Entry,
    MemoryPortalError,
    Page,
    Recall,
    Recovery,
    WriteResult,
)

from memory_portal.memory.models import Note, Run, Trust
from tests.mcp.conftest import run_on_loop

pytestmark = pytest.mark.django_db(transaction=True)

FACT = "The staging database is restored from the nightly snapshot at 02:00 UTC."


@pytest.fixture
def portal(live_server, portal_tokens):
    with Client(live_server.url, portal_tokens.run) as client:
        yield client


@pytest.fixture
def manager(live_server, portal_tokens):
    with Client(live_server.url, portal_tokens.manager) as client:
        yield client


def test_the_tools_round_trip(portal):
    tools = portal.list_tools()
    assert tools.enabled and [t.name for t in tools.tools][0] == "memory_write"
    written = portal.memory_write("fact", FACT, tags=["Ops", "staging"], summary="Staging restore")
    assert isinstance(written, WriteResult) and written.created and written.trust == "learned"
    assert portal.memory_write("fact", FACT).created is False  # idempotent: the same id
    page = portal.memory_read(written.id)
    assert isinstance(page, Page) and page.next_offset is None
    entry = page.entries[0]
    assert isinstance(entry, Entry) and entry.content == FACT and entry.tags == ["ops", "staging"]
    assert entry.task_key == "PIN-42" and entry.producer_status == "running"
    assert entry.created_at.tzinfo is not None
    assert [e.id for e in portal.memory_read(tag="ops").entries] == [written.id]
    assert [e.id for e in portal.memory_search("nightly snapshot").entries] == [written.id]
    assert portal.memory_status().note_count == 1

    forgotten = portal.memory_forget(written.id)
    recoveries = portal.memory_read(target="recoveries").entries
    assert (
        isinstance(recoveries[0], Recovery) and recoveries[0].recovery_id == forgotten.recovery_id
    )
    assert portal.memory_restore(forgotten.recovery_id).status == "active"

    item = portal.scratchpad("add", text="check the restore log")
    assert portal.scratchpad("done", item_id=item.item_id).done is True
    assert [i.text for i in portal.scratchpad("list").items] == ["check the restore log"]
    assert portal.call_tool("memory_status", {})["noteCount"] == 1


def test_refusals_carry_code_message_hint_and_field(portal):
    with pytest.raises(MemoryPortalError) as refused:
        portal.memory_write("fact", "x" * 2001)
    error = refused.value
    assert (error.code, error.status, error.field) == ("memory_invalid", 400, "content")
    assert error.message and error.hint and error.retry_after is None and not error.retryable
    with pytest.raises(MemoryPortalError) as secret:
        portal.memory_write("fact", "The deploy key is AKIAQYLPMN5HHHFPZAM2 for the bucket.")
    assert secret.value.code == "secret_in_memory" and secret.value.reason
    assert "AKIA" not in str(secret.value)
    with pytest.raises(MemoryPortalError) as missing:
        portal.memory_read("mem_00000000000000000000000000")
    assert missing.value.code == "memory_not_found" and missing.value.status == 404


def test_v1_facts_and_recall(portal):
    saved = portal.save_fact(FACT)
    assert saved.object == "memory" and saved.text == FACT and saved.expires_at is not None
    assert [m.id for m in portal.list_memories()] == [saved.id]
    recall = portal.recall("When is the staging database restored?")
    assert isinstance(recall, Recall) and "--- MEMORY ---" in recall.block
    assert [m.id for m in recall.memories] == [saved.id] and recall.memories[0].score >= 0.5
    day = portal.append_day("restored staging by hand")
    assert day.kind == "day" and "restored staging by hand" in day.text
    archived = portal.archive(saved.id, "moved to the runbook")
    assert archived.status == "archived" and archived.archive_reason == "moved to the runbook"
    assert portal.unarchive(saved.id).status == "active"


def test_a_manager_connects_an_agent_and_reviews_what_it_wrote(manager, world):
    project = world.project.slug
    agent_id = manager.create_agent(project, "Support bot", "runtime")
    key = manager.create_agent_key(project, agent_id, "CI")
    assert key.key.startswith("mpk_") and key.key not in repr(key)
    agent = manager.with_token(key.key)
    run = agent.start_run(task="Answer support questions", task_key="SUP-7")
    assert run.token not in repr(run)
    worker = agent.for_run(run)
    note = worker.memory_write("fact", "Refunds above 500 EUR need a second approval.")
    assert Run.objects.get(pk=run.id).task_key == "SUP-7"

    page = manager.project_memory(project, agent=agent_id)
    assert [n.id for n in page.notes] == [note.id] and page.setting.enabled
    assert manager.veto(project, note.id).archive_reason == "vetoed"
    with pytest.raises(MemoryPortalError) as vetoed:
        worker.memory_write("fact", "Refunds above 500 EUR need a second approval.")
    assert vetoed.value.code == "memory_vetoed"
    assert manager.undo_veto(project, note.id).status == "active"
    manager.review(project, note.id, "approved")
    assert Note.objects.get(pk=note.id).trust == Trust.REVIEWED

    preview = manager.revert_run(project, run.id, dry_run=True)
    assert preview.dry_run and [n.id for n in preview.reviewed] == [note.id]
    manager.finish_run(project, run.id)
    with pytest.raises(MemoryPortalError) as finished:
        worker.memory_status()
    assert finished.value.code == "auth_invalid"
    assert [k.label for k in manager.list_agent_keys(project, agent_id)] == ["CI"]
    manager.revoke_agent_key(project, agent_id, key.id)


def test_a_script_with_a_key_finishes_the_runs_it_starts(manager, world):
    project = world.project.slug
    agent_id = manager.create_agent(project, "Nightly script", "implement")  # no memory
    manager.update_agent(project, agent_id, stage="runtime", name="Nightly job")
    key = manager.create_agent_key(project, agent_id, "cron")
    run = manager.with_token(key.key).start_run(task_key="NIGHT-1")
    worker = manager.with_token(key.key).for_run(run)
    worker.report_run(run.id, step="collect")
    written = worker.memory_write("fact", "The nightly job collects at 02:00 UTC.")
    assert Note.objects.get(pk=written.id).step == "collect"
    worker.report_run(run.id, status="succeeded")
    assert Run.objects.get(pk=run.id).status == "succeeded"
    with pytest.raises(MemoryPortalError) as finished:
        worker.memory_status()
    assert finished.value.code == "auth_invalid"


def test_export_and_import_through_the_client(live_server, manager, portal, world, make_user):
    portal.memory_write("fact", FACT)
    data = manager.export_project(world.project.slug)
    assert data.startswith(b'{"type": "header"') or b'"header"' in data.splitlines()[0]
    admin_token = _admin_token(make_user)
    with Client(live_server.url, admin_token) as admin:
        dry = admin.import_file(data, project="acme-copy", dry_run=True)
        assert dry.dry_run and dry.created_project and not dry.inserted
        assert {(p.username, p.role) for p in dry.members} >= {(world.manager.username, "manager")}
        with pytest.raises(MemoryPortalError) as unconfirmed:
            admin.import_file(data, project="acme-copy")
        assert unconfirmed.value.code == "import_members_unconfirmed"
        result = admin.import_file(data, project="acme-copy", grant_members=True)
        assert result.created_project and result.remapped and result.inserted["note"] == 1
        again = admin.import_file(data, project="acme-copy")
        assert again.unchanged["note"] == 1 and not again.inserted.get("note")
        with pytest.raises(MemoryPortalError) as refused:
            admin.import_file(b'{"type": "header"}\n')
        assert refused.value.code == "memory_invalid" and refused.value.lines


def test_the_async_client(live_server, portal_tokens):
    async def go():
        async with AsyncClient(live_server.url, portal_tokens.run) as portal:
            written = await portal.memory_write("lesson", "Async writes land like sync ones.")
            found = await portal.memory_search("async writes")
            status = await portal.memory_status()
            with pytest.raises(MemoryPortalError) as refused:
                await portal.memory_forget("mem_00000000000000000000000000")
            return written, found, status, refused.value

    written, found, status, refused = run_on_loop(go())
    assert [e.id for e in found.entries] == [written.id] and status.note_count == 1
    assert refused.code == "memory_not_found"


def test_a_server_nobody_listens_on_is_connection_failed_after_the_retries():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with (
        Client(f"http://127.0.0.1:{port}", "t", retries=1) as portal,
        pytest.raises(MemoryPortalError) as unreachable,
    ):
        portal.memory_status()
    assert unreachable.value.code == "connection_failed" and unreachable.value.retryable


def _busy_then(answers: list):
    """A transport answering each request with the next of `answers` (the last one again
    once they run out): a stand-in for the network, to count what the client sends."""
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return answers[min(len(sent), len(answers)) - 1]()

    return sent, httpx.MockTransport(handler)


def busy():
    return httpx.Response(
        503,
        headers={"Retry-After": "0"},
        json={"error": {"code": "memory_busy", "message": "Busy.", "hint": "Retry."}},
    )


def ok():
    return httpx.Response(
        200, json={"id": "mem_1", "trust": "learned", "status": "active", "created": True}
    )


def test_a_503_with_retry_after_is_sent_again():
    sent, transport = _busy_then([busy, busy, ok])
    with Client("http://portal.test", "t", transport=transport) as portal:
        assert portal.memory_write("fact", FACT).id == "mem_1"
    assert len(sent) == 3 and sent[0].content == sent[2].content


def test_retries_run_out_into_the_error_with_retry_after():
    sent, transport = _busy_then([busy])
    with (
        Client("http://portal.test", "t", transport=transport, retries=2) as portal,
        pytest.raises(MemoryPortalError) as refused,
    ):
        portal.memory_write("fact", FACT)
    error = refused.value
    assert len(sent) == 3 and error.code == "memory_busy" and error.retry_after == 0
    assert error.retryable


def test_the_async_client_retries_too():
    sent, transport = _busy_then([busy, ok])

    async def go():
        async with AsyncClient("http://portal.test", "t", transport=transport) as portal:
            return await portal.memory_write("fact", FACT)

    assert run_on_loop(go()).created and len(sent) == 2


def _admin_token(make_user) -> str:
    from memory_portal.memory import services

    return services.token_create(actor=None, user=make_user("root", superuser=True))[1]


def test_a_manager_holds_notes_for_review_and_trusts_an_agent(manager, portal, world):
    project = world.project.slug
    manager.set_review_policy(project, "hold")
    written = portal.memory_write("fact", "Held until a person approves it.")
    assert written.held and written.trust == "learned"
    status = portal.memory_status()
    assert status.review_policy == "hold" and status.held_count == 1
    manager.update_agent(project, world.agent.pk, trusted=True)
    assert portal.memory_status().held_count == 0
    assert manager.project_memory(project).setting.review_policy == "hold"


def test_members_people_and_runs_through_the_client(live_server, manager, world, make_user):
    project = world.project.slug
    make_user("dora")
    manager.add_member(project, "dora", "member")
    assert ("dora", "member") in {(m.username, m.role) for m in manager.list_members(project)}
    manager.remove_member(project, "dora")
    assert "dora" not in {m.username for m in manager.list_members(project)}
    with pytest.raises(MemoryPortalError) as last:
        manager.remove_member(project, world.manager.username)
    assert last.value.code == "project_last_manager"
    runs = manager.list_runs(project, agent=world.agent.pk, limit=5)
    assert [r.id for r in runs.runs] == [world.run.pk] and runs.runs[0].task_key == "PIN-42"
    with Client(live_server.url, _admin_token(make_user)) as admin:
        dora = admin.update_person("dora", active=False)
        assert not dora.active and {p.username for p in admin.list_people()} >= {"dora", "root"}
