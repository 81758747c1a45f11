"""`memory_search` as a request runs it: the page is read with the columns its answer shows
(no stored vectors), and its statements do not grow with the page (no row read twice); a
repeated query is answered from its kept ranking (selectors/search.py `kept_rankings`)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory_portal.memory import services
from memory_portal.memory.selectors import search as search_module
from memory_portal.memory.services import vectors

from .conftest import RoundTrips

pytestmark = pytest.mark.django_db


def _search(api, token, **args) -> tuple[dict, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        answer = api.tool("memory_search", token, {"query": "release train", **args})
    assert answer.status_code == 200, answer.json()
    return answer.json(), [q["sql"] for q in captured.captured_queries]


def test_the_page_reads_what_the_answer_shows_once(api, tokens, world):
    for i in range(8):
        services.note_write(
            actor=world.as_agent2, kind="fact", content=f"Release train {i} ships on Tuesday."
        )
    _search(api, tokens.agent)  # the token's first call also stamps its last use
    one, statements_one = _search(api, tokens.agent, limit=1)
    five, statements_five = _search(api, tokens.agent, limit=5)
    assert len(one["entries"]) == 1 and len(five["entries"]) == 5
    assert len(statements_five) == len(statements_one), "\n".join(statements_five)
    (page,) = [s for s in statements_five if 'FROM "project_memory_entry" e ' in s]
    assert 'e."content"' in page and 'r."status"' in page, page  # what the answer shows
    assert '."embedding"' not in page and '."task_embedding"' not in page, page
    assert '."task_description"' not in page, page


@pytest.mark.django_db(transaction=True)
def test_a_repeated_search_is_answered_after_three_round_trips(api, tokens, world):
    """PostgreSQL, as a request runs, a query asked before at the same revision (its ranking
    kept): the token check that takes the run's slot and the call from its budget, the page's
    rows by id and its read records, then the answer; the trace row with the slot given back
    goes after it. Nothing reads the project's candidates again."""
    if connection.vendor != "postgresql":
        pytest.skip("the round trips of PostgreSQL's search path")
    for i in range(8):
        services.note_write(
            actor=world.as_agent2, kind="fact", content=f"Release train {i} ships on Tuesday."
        )
    # The notes' vectors land after their commit (a background thread); a ranking with a
    # note still waiting for its vector is not kept, so the search waits for them here.
    assert vectors.background.drain(timeout=60)
    _search(api, tokens.agent)  # stamps the token's last use, keeps the ranking
    with RoundTrips(connection) as sent:
        answer = api.tool("memory_search", tokens.agent, {"query": "release train"})
    assert answer.status_code == 200, answer.json()
    assert len(answer.json()["entries"]) == 5 and answer.json()["nextOffset"] == 5
    assert len(sent.before_answer) == 3, "\n".join(s[:160] for s in sent.trips)
    (check, page, reads), (trace,) = sent.before_answer, sent.after_answer
    assert "memory_apitoken" in check and "INSERT INTO memory_run_slot" in check
    assert "UPDATE memory_run AS counted SET tool_calls" in check
    assert "e.id = ANY(" in page and "text_match" not in page
    assert "project_memory_read" in reads
    assert "memory_toolcallcount" in trace and "DELETE FROM memory_run_slot" in trace


def _finds(statements: list[str]) -> bool:
    """Whether a search read the project's candidates (it was ranked, not kept): a SELECT of
    notes other than the page's rows by id."""
    notes, page = 'FROM "project_memory_entry"', 'FROM "project_memory_entry" e '
    return any(s.startswith("SELECT") and notes in s and page not in s for s in statements)


@pytest.mark.usefixtures("stored_vectors")
def test_a_kept_ranking_lasts_until_a_note_it_ranked_expires(api, tokens, world, monkeypatch):
    """Time changes what an agent sees only as a note expires: a query's ranking is kept
    until the first expiry among the notes it ranked, not past it."""
    now = timezone.now()
    services.note_write(
        actor=world.as_agent2, kind="fact", content="Release train 1 ships on Tuesday.",
        expires_at=now + timedelta(hours=1),
    )  # fmt: skip
    services.note_write(
        actor=world.as_agent2, kind="fact", content="Release train 2 ships on Tuesday."
    )
    first, statements = _search(api, tokens.agent)
    assert len(first["entries"]) == 2 and _finds(statements)
    monkeypatch.setattr(timezone, "now", lambda: now + timedelta(minutes=59))
    still, statements = _search(api, tokens.agent)
    assert still == first and not _finds(statements), "\n".join(statements)
    monkeypatch.setattr(timezone, "now", lambda: now + timedelta(hours=1, seconds=1))
    later, statements = _search(api, tokens.agent)
    assert _finds(statements), "\n".join(statements)
    assert [e["content"] for e in later["entries"]] == ["Release train 2 ships on Tuesday."]


@pytest.mark.usefixtures("stored_vectors")
def test_a_kept_ranking_is_the_callers_own_and_ends_with_any_change(api, tokens, world):
    """A ranking is kept for one view, filters and query: another filter, another agent's
    view, or a veto (a new revision) reads the candidates anew and answers what they see."""
    fact = services.note_write(
        actor=world.as_agent2, kind="fact", content="Release train 1 ships on Tuesday."
    ).note
    services.note_write(
        actor=world.as_agent2, kind="lesson", content="Release train 2 ships on Tuesday."
    )
    services.fact_save(actor=world.as_agent2, text="Release train 3 is mine.")  # private
    everything, _ = _search(api, tokens.agent)
    assert len(everything["entries"]) == 2  # agent2's own note is not in agent's reach
    lessons, statements = _search(api, tokens.agent, kind="lesson")
    assert _finds(statements) and [e["kind"] for e in lessons["entries"]] == ["lesson"]
    theirs, statements = _search(api, tokens.agent2)
    assert _finds(statements) and len(theirs["entries"]) == 3
    again, statements = _search(api, tokens.agent)
    assert again == everything and not _finds(statements)
    services.note_veto(actor=world.as_manager, note_id=fact.pk, reason="wrong train")
    after, statements = _search(api, tokens.agent)
    assert _finds(statements) and fact.pk not in {e["id"] for e in after["entries"]}


def test_a_ranking_longer_than_a_hybrid_one_is_not_kept(api, tokens, world, monkeypatch):
    """A search by words alone (here a quoted phrase) lists every match; a ranking of more
    ids than a hybrid search keeps (SEARCH_RESULTS) is read again each time, not held."""
    monkeypatch.setattr(search_module, "SEARCH_RESULTS", 2)
    for i in range(3):
        services.note_write(
            actor=world.as_agent2, kind="fact", content=f"Release train {i} ships on Tuesday."
        )
    query = {"query": '"release train"', "limit": 2}
    first, _ = _search(api, tokens.agent, **query)
    again, statements = _search(api, tokens.agent, **query)
    assert again == first and first["nextOffset"] == 2 and _finds(statements)
    monkeypatch.setattr(search_module, "SEARCH_RESULTS", 3)
    _search(api, tokens.agent, **query)
    _, statements = _search(api, tokens.agent, **query)
    assert not _finds(statements), "\n".join(statements)
