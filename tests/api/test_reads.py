"""Read records (SPEC §2.10): every note served to an agent's run is recorded before the answer
— by memory_read and memory_search, v1 list and recall, the start-of-run recall — with its rank,
score and trust at the time, never the query; no record, no answer (503); retention and
deletion clear them; a veto's event says who had read the note."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import OperationalError, transaction
from django.utils import timezone

from memory_portal.memory import services
from memory_portal.memory.models import Event, NoteRead, ReadTool, Run, RunStatus, ToolCallCount
from memory_portal.memory.services import reads as reads_module

from .conftest import error_code

pytestmark = pytest.mark.django_db


@pytest.fixture
def fact(world):
    """A project-wide fact written by run A (the runtime agent), seen by run B (design)."""
    return services.note_write(
        actor=world.as_agent, kind="fact", content="The billing service retries webhooks for a day."
    ).note


def reads_of(run):
    return list(
        NoteRead.objects.filter(run=run).select_related("note", "run").order_by("read_at", "rank")
    )


def test_run_b_searching_and_reading_run_a_note_is_recorded(api, tokens, world, fact):
    found = api.tool("memory_search", tokens.agent2, {"query": "billing webhooks"})
    assert found.status_code == 200, found.json()
    assert [e["id"] for e in found.json()["entries"]] == [fact.id]
    by_id = api.tool("memory_read", tokens.agent2, {"id": fact.id})
    assert by_id.status_code == 200

    rows = reads_of(world.run2)
    assert [(r.note.id, r.tool, r.rank, r.score, r.trust) for r in rows] == [
        (fact.id, ReadTool.SEARCH, 1, None, "learned"),
        (fact.id, ReadTool.READ, 1, None, "learned"),
    ]
    assert rows[0].run.agent_id == world.agent2.id
    assert rows[0].run.top_level_run_id == world.run2.top_level_run_id
    assert not NoteRead.objects.filter(run=world.run).exists()  # its writer read nothing


def test_a_page_is_recorded_in_its_order_ranked_from_its_offset(api, tokens, world):
    ids = [
        services.note_write(
            actor=world.as_agent, kind="fact", content=f"Release step {n} is checked twice."
        ).note.id
        for n in range(4)
    ]
    page = api.tool("memory_read", tokens.agent, {"target": "long_term", "offset": 1, "limit": 2})
    served = [e["id"] for e in page.json()["entries"]]
    assert served == list(reversed(ids))[1:3]
    assert [(r.note.id, r.rank) for r in reads_of(world.run)] == list(
        zip(served, (2, 3), strict=True)
    )


def test_v1_list_recall_and_the_start_recall_are_recorded_with_scores(api, tokens, world):
    note = services.fact_save(actor=world.as_agent, text="Deploys go out on Tuesdays.").note
    assert api.get("/api/v1/memories", tokens.agent).status_code == 200
    recalled = api.post(
        "/api/v1/memories/recall", tokens.agent, {"query": "when do deploys go out"}
    )
    assert recalled.status_code == 200
    score = recalled.json()["memories"][0]["score"]
    started = api.post("/api/v1/memories/recall", tokens.agent, {"start": True})
    assert started.status_code == 200 and started.json()["memories"]

    rows = reads_of(world.run)
    assert [(r.tool, r.note.id) for r in rows] == [
        (ReadTool.LIST, note.id),
        (ReadTool.RECALL, note.id),
        (ReadTool.START_RECALL, note.id),
    ]
    assert rows[1].score == pytest.approx(score)


def test_a_person_reading_is_not_recorded(api, tokens, world, fact):
    assert api.get(f"/api/v1/memories?agentId={world.agent.id}", tokens.manager).status_code == 200
    assert not NoteRead.objects.exists()


def test_the_record_holds_no_query(api, tokens, world, fact):
    api.tool("memory_search", tokens.agent2, {"query": "billing webhooks"})
    values = [str(v) for row in NoteRead.objects.values() for v in row.values()]
    assert not any("billing" in v for v in values)


def test_a_read_that_cannot_be_recorded_serves_nothing(api, tokens, world, fact, monkeypatch):
    def refuse(*args, **kwargs):
        raise OperationalError("the disk is full")

    monkeypatch.setattr(reads_module, "_insert", refuse)
    for name, body in (("memory_search", {"query": "billing"}), ("memory_read", {"id": fact.id})):
        answer = api.tool(name, tokens.agent2, body)
        assert answer.status_code == 503
        assert answer["Retry-After"] == "2"
        assert error_code(answer) == "memory_read_unrecorded"
        assert "billing" not in answer.content.decode()
    traced = ToolCallCount.objects.get(run=world.run2, tool="search")
    assert traced.outcome == "memory_read_unrecorded"
    # Nothing found, nothing to record: an empty answer does not need the table.
    empty = api.tool("memory_search", tokens.agent2, {"query": "kubernetes"})
    assert empty.status_code == 200 and empty.json()["entries"] == []


def test_retention_prunes_old_records_in_batches(world, fact, settings, monkeypatch):
    now = timezone.now()
    old = now - timedelta(days=91)
    second = timedelta(seconds=1)
    for when in (old, old - second, old - 2 * second, now - timedelta(days=89)):
        NoteRead.objects.create(
            note=fact, run=world.run2, tool=ReadTool.READ, rank=1, trust="learned", read_at=when
        )
    monkeypatch.setattr(reads_module, "PRUNE_BATCH", 2)
    assert services.reads_prune(now=now, batches=1) == 2  # one bounded batch a pass
    assert services.reads_prune(now=now) == 1
    assert NoteRead.objects.count() == 1
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "READ_RETENTION_DAYS": 30}
    assert services.reads_prune(now=now) == 1  # the setting holds: 89 days is past 30
    assert not NoteRead.objects.exists()


def test_deleting_a_run_or_resetting_clears_their_records(api, tokens, world, fact):
    api.tool("memory_read", tokens.agent2, {"id": fact.id})
    api.tool("memory_read", tokens.agent, {"id": fact.id})
    assert NoteRead.objects.count() == 2
    Run.objects.filter(pk=world.run2.pk).update(status=RunStatus.SUCCEEDED)
    services.run_delete(actor=world.as_manager, run=Run.objects.get(pk=world.run2.pk))
    assert list(NoteRead.objects.values_list("run__id", flat=True)) == [world.run.pk]
    services.memory_reset(actor=world.as_manager, project=world.project)
    assert not NoteRead.objects.exists()


def test_a_veto_event_names_the_runs_that_read_the_note(api, tokens, world, fact):
    api.tool("memory_search", tokens.agent2, {"query": "billing webhooks"})
    api.tool("memory_read", tokens.agent2, {"id": fact.id})
    done = services.run_create(actor=None, agent=world.agent, task_key="PIN-44")
    done_token = services.token_create(actor=None, run=done)[1]
    api.tool("memory_read", done_token, {"id": fact.id})
    Run.objects.filter(pk=done.pk).update(status=RunStatus.SUCCEEDED)

    services.note_veto(actor=world.as_manager, note_id=fact.id)
    event = Event.objects.get(type="note.vetoed")
    assert event.data["reads"] == {
        "runs": 2, "agents": 2, "runningRunIds": [world.run2.pk], "atLeast": False
    }
    # A written note's event says nothing of reads: none can have happened.
    assert "reads" not in Event.objects.filter(type="note.written").first().data


def test_the_reads_routes_list_who_read_a_note_and_what_a_run_read(api, tokens, world, fact):
    api.tool("memory_search", tokens.agent2, {"query": "billing webhooks"})
    api.tool("memory_read", tokens.agent2, {"id": fact.id})
    base = f"/api/admin/projects/{world.project.slug}"

    answer = api.get(f"{base}/memory/{fact.id}/reads?limit=1", tokens.manager)
    assert answer.status_code == 200, answer.json()
    body = answer.json()
    assert (body["runs"], body["agents"], body["runningRunIds"]) == (1, 1, [world.run2.pk])
    assert body["nextOffset"] == 1 and len(body["reads"]) == 1
    newest = body["reads"][0]
    assert newest["tool"] == "read" and newest["runId"] == world.run2.pk
    assert newest["agentId"] == world.agent2.pk and newest["runStatus"] == "running"
    assert newest["trustWhenRead"] == "learned" and newest["rank"] == 1
    second = api.get(f"{base}/memory/{fact.id}/reads?offset=1", tokens.manager).json()
    assert [r["tool"] for r in second["reads"]] == ["search"] and second["nextOffset"] is None

    services.note_veto(actor=world.as_manager, note_id=fact.id)
    run = api.get(f"{base}/runs/{world.run2.pk}/reads", tokens.manager).json()
    assert [(r["noteId"], r["changedSince"]) for r in run["reads"]] == [
        (fact.id, ["vetoed"]),
        (fact.id, ["vetoed"]),
    ]
    assert run["reads"][0]["statusNow"] == "archived"
    assert "content" not in run["reads"][0] and "billing" not in str(run)


def test_the_reads_routes_are_for_managers_of_the_project(api, tokens, world, fact):
    base = f"/api/admin/projects/{world.project.slug}"
    assert api.get(f"{base}/memory/{fact.id}/reads", tokens.member).status_code == 403
    assert api.get(f"{base}/memory/{fact.id}/reads", tokens.outsider).status_code == 404
    assert api.get(f"{base}/memory/mem_nope/reads", tokens.manager).status_code == 404
    assert api.get(f"{base}/runs/run_nope/reads", tokens.manager).status_code == 404
    assert api.get(f"{base}/runs/{world.run.pk}/reads", tokens.agent).status_code in (401, 403)


def test_reading_ones_forgotten_notes_is_recorded(api, tokens, world, fact):
    services.note_forget(actor=world.as_agent, note_id=fact.id)
    page = api.tool("memory_read", tokens.agent, {"target": "recoveries"})
    assert [e["id"] for e in page.json()["entries"]] == [fact.id]
    assert [(r.note.id, r.tool, r.rank, r.trust) for r in reads_of(world.run)] == [
        (fact.id, ReadTool.READ, 1, "learned")
    ]


@pytest.mark.parametrize(("days", "starts"), [("29", False), ("30", True), ("soon", False)])
def test_the_retention_is_at_least_the_30_days_the_review_reads(days, starts):
    """The daily review and the review queue ask which facts no run was served in 30 days: a
    retention under that would forget the answer, so it stops the start-up, naming the setting."""
    import sys

    from tests.dashboard.test_setup import clean_env, run

    env = clean_env(MEMORY_PORTAL_READ_RETENTION_DAYS=days)
    code = "import django; django.setup(); from django.conf import settings; print('RETENTION', settings.MEMORY_PORTAL['READ_RETENTION_DAYS'])"  # noqa: E501
    done = run([sys.executable, "-c", code], env, timeout=120)
    if starts:
        assert done.returncode == 0 and "RETENTION 30" in done.stdout, done.stderr
    else:
        assert done.returncode != 0
        assert "MEMORY_PORTAL_READ_RETENTION_DAYS must be a whole number of days, 30 or more" in (
            done.stderr
        )


def test_the_day_log_a_recall_lists_is_recorded_after_its_facts(api, tokens, world):
    fact = services.fact_save(actor=world.as_agent, text="Deploys go out on Tuesdays.").note
    day = services.day_append(actor=world.as_agent, line="checked the deploy calendar")
    recalled = api.post(
        "/api/v1/memories/recall", tokens.agent, {"query": "when do deploys go out"}
    )
    assert recalled.status_code == 200
    assert any("checked the deploy calendar" in line for line in recalled.json()["dayLog"])
    rows = reads_of(world.run)
    assert [(r.note.id, r.tool, r.rank, r.score is None) for r in rows] == [
        (fact.id, ReadTool.RECALL, 1, False),
        (day.id, ReadTool.RECALL, 2, True),
    ]


def test_a_note_twice_in_one_answer_is_one_read_at_its_first_place(world, fact):
    served = [(fact.id, "learned", 0.9), (fact.id, "learned", 0.4)]
    assert services.reads_record(actor=world.as_agent2, tool=ReadTool.SEARCH, served=served) == 1
    assert [(r.note.id, r.rank, r.score) for r in reads_of(world.run2)] == [(fact.id, 1, 0.9)]


def test_a_note_deleted_before_its_record_serves_nothing(world, fact):
    """The record finds the note's key by its id inside the INSERT: a note gone meanwhile
    fails the whole INSERT, so the call answers 503 rather than serve without a record."""
    from memory_portal.memory.errors import MemoryPortalError

    other = services.note_write(
        actor=world.as_agent, kind="fact", content="Staging is rebuilt every night."
    ).note
    served = [(other.id, "learned", None), ("mem_01jgone000000000000000000", "learned", None)]
    with pytest.raises(MemoryPortalError) as refused, transaction.atomic():
        services.reads_record(actor=world.as_agent2, tool=ReadTool.READ, served=served)
    assert refused.value.code == "memory_read_unrecorded"
    assert not NoteRead.objects.exists()


def test_the_tool_and_the_trust_are_kept_as_codes_and_read_as_words(world, fact):
    """Two-byte codes in the table (the read records are built small), words everywhere else;
    every tool and every trust there is has its code."""
    assert set(NoteRead._meta.get_field("tool").words) == set(ReadTool.values)
    assert set(NoteRead._meta.get_field("trust").words) == {"learned", "reviewed", "rejected"}
    services.reads_record(
        actor=world.as_agent2, tool=ReadTool.START_RECALL, served=[(fact.id, "reviewed", None)]
    )
    read = NoteRead.objects.get(tool="start_recall", trust="reviewed")
    assert (read.tool, read.trust) == ("start_recall", "reviewed")
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"SELECT tool, trust FROM {NoteRead._meta.db_table}")
        assert cursor.fetchall() == [(3, 1)]
