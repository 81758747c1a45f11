"""A start recall against the run's task (docs/RECALL.md, "Against the task"): a run created
with a task (title and description) gets, on `start: true` without a query, its agent's facts
scored against that text; a run without one keeps the newest-first listing."""

from __future__ import annotations

import pytest

from bench.recall_eval import evaluate, load_dataset, task_queries
from memory_portal.memory import services
from memory_portal.memory.actors import Actor
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.models import Run
from memory_portal.memory.recall.service import recall
from memory_portal.memory.validation import TASK_TEXT_MAX, task_text

DATASET = load_dataset()


def test_the_task_set_is_labelled_and_consistent():
    tasks = DATASET["TASKS"]
    assert len(tasks) >= 10
    assert len({t["agent"] for t in tasks}) >= 4
    agent_of = {f["key"]: f["agent"] for f in DATASET["FACTS"]}
    for t in tasks:
        assert t["task"]["title"] and t["task"]["description"]
        assert len(t["task"]["title"]) + len(t["task"]["description"]) <= TASK_TEXT_MAX
        assert t["expected"] and all(agent_of[k] == t["agent"] for k in t["expected"])


def test_quality_against_the_task_on_the_labelled_set():
    """The figures docs/RECALL.md reports for the task set, as floors (measured 0.727 / 0.333,
    both tiers 0.583: a Stripe fact the yen task shares the vendor's name with, and little
    else, is no longer confident); and the description earns its place: scoring the title
    alone finds far less, in either tier."""
    ev = evaluate(DATASET)
    assert ev.tasks.precision >= 0.7, ev.tasks.precision
    assert ev.tasks.recall >= 0.33, ev.tasks.recall
    assert ev.tasks.both_recall >= 0.58, ev.tasks.both_recall
    titles = [{**t, "task": {"title": t["task"]["title"]}} for t in DATASET["TASKS"]]
    titles_only = evaluate({**DATASET, "TASKS": titles})
    # Measured: the first tier finds 8 expected facts against 4, both tiers 14 against 10.
    assert ev.tasks.hits >= 1.75 * titles_only.tasks.hits, (ev.tasks.hits, titles_only.tasks.hits)
    assert ev.tasks.both_recall >= 1.4 * titles_only.tasks.both_recall


def _agent_with_facts(world, agent_name: str) -> dict[str, str]:
    by_text = {}
    for fact in DATASET["FACTS"]:
        if fact["agent"] == agent_name:
            by_text[fact["text"]] = fact["key"]
            services.fact_save(actor=world.as_agent, text=fact["text"])
    return by_text


@pytest.mark.parametrize("agent_name", ["release", "integrations"])
def test_a_start_recall_scores_against_the_runs_task_as_the_evaluator_does(world, agent_name):
    by_text = _agent_with_facts(world, agent_name)
    picks = {
        o.query: o.picked_keys for o in evaluate(DATASET).tasks.outcomes if o.agent == agent_name
    }
    cases = [q for q in task_queries(DATASET) if q["agent"] == agent_name]
    assert cases and any(picks.values())
    for case in cases:
        run, _token = services.run_start(
            actor=None,
            agent=world.agent,
            task_key="PIN-1",
            task_title=case["task"]["title"],
            task_description=case["task"]["description"],
        )
        result = recall(actor=Actor.agent_run(run), start=True)
        assert result.skipped is False and result.fallback is None
        assert all(p.score is not None and p.score >= 0.5 for p in result.memories)
        assert {by_text[p.note.content] for p in result.memories} == picks[case["query"]]


def test_a_query_still_wins_over_the_task(world):
    _agent_with_facts(world, "release")
    run = services.run_create(
        actor=None, agent=world.agent, task_title="Move shop.acme.test to the new load balancer"
    )
    result = recall(actor=Actor.agent_run(run), query="helm rollback of prod", start=True)
    assert [p.note.content.split()[0:3] for p in result.memories] == [["To", "roll", "back"]]


def test_without_a_task_a_start_recall_lists_the_newest_as_before(world):
    _agent_with_facts(world, "ci")
    result = recall(actor=world.as_agent, start=True)
    assert result.fallback == "no_query"
    assert len(result.memories) == sum(1 for f in DATASET["FACTS"] if f["agent"] == "ci")
    assert all(p.score is None for p in result.memories)


def test_a_person_naming_the_agent_has_no_task(world):
    _agent_with_facts(world, "ci")
    result = recall(actor=world.as_member, agent_id=world.agent.id, start=True, mark=False)
    assert result.fallback == "no_query"


def test_the_task_is_stored_trimmed_and_scored_as_title_then_description(world):
    run = services.run_create(
        actor=None,
        agent=world.agent,
        task_title="  PIN-7: fix the staging deploy ",
        task_description="The helm upgrade hangs.\r\nSee the runbook.",
    )
    run.refresh_from_db()
    assert run.task_title == "PIN-7: fix the staging deploy"
    assert run.task_description == "The helm upgrade hangs.\nSee the runbook."
    assert run.task_text == task_text(run.task_title, run.task_description)
    assert run.task_text.splitlines() == [
        "PIN-7: fix the staging deploy",
        "The helm upgrade hangs.",
        "See the runbook.",
    ]
    assert services.run_create(actor=None, agent=world.agent).task_text == ""


@pytest.mark.parametrize(
    ("title", "description", "field"),
    [
        ("x" * 1500, "y" * 501, "task"),
        ("Two\nlines", "", "task.title"),
        ("", "A description without a title", "task.title"),
        ("   ", "A description", "task.title"),
        ("Title", "nul \x00 inside", "task.description"),
        (7, "", "task.title"),
    ],
)
def test_a_bad_task_is_refused_and_no_run_is_made(world, title, description, field):
    before = Run.objects.count()
    with pytest.raises(MemoryPortalError) as info:
        services.run_start(
            actor=None, agent=world.agent, task_title=title, task_description=description
        )
    assert info.value.code == "memory_invalid" and info.value.field == field
    assert info.value.status == 400 and info.value.hint
    assert Run.objects.count() == before


def test_a_task_at_the_limit_is_kept_whole(world):
    run = services.run_create(
        actor=None, agent=world.agent, task_title="t" * 1000, task_description="d" * 1000
    )
    run.refresh_from_db()
    assert len(run.task_title) + len(run.task_description) == TASK_TEXT_MAX


def test_a_secret_in_the_task_is_refused(world):
    with pytest.raises(MemoryPortalError) as info:
        services.run_create(
            actor=None,
            agent=world.agent,
            task_title="Rotate the deploy key",
            task_description="Use api_key = 'Zx81kQ2mP0aa93LmQ' until then",
        )
    assert info.value.code == "secret_in_memory" and info.value.field == "task.description"
    assert "Zx81kQ2mP0aa93LmQ" not in info.value.message


def test_run_start_leaves_no_run_when_minting_its_token_fails(world, monkeypatch):
    from memory_portal.memory import tokens
    from memory_portal.memory.models import ApiToken, AuditEvent

    def fail():
        raise OSError("no randomness available")

    monkeypatch.setattr(tokens, "generate", fail)
    before = Run.objects.count(), ApiToken.objects.count(), AuditEvent.objects.count()
    with pytest.raises(OSError):
        services.run_start(actor=world.as_manager, agent=world.agent, task_title="Ship it")
    after = Run.objects.count(), ApiToken.objects.count(), AuditEvent.objects.count()
    assert after == before, "neither the run nor its audit event outlives the failed mint"


def test_run_start_returns_the_run_and_a_working_token_for_it(world):
    from memory_portal.memory.tokens import token_authenticate

    run, plaintext = services.run_start(
        actor=world.as_manager, agent=world.agent, task_key="PIN-7", can_write=False
    )
    token = token_authenticate(plaintext)
    assert token.run_id == run.pk and token.can_write is False
    assert run.task_key == "PIN-7" and run.status == "running"
