"""`memory_search` as a request runs it: the page is read with the columns its answer shows
(no stored vectors), and its statements do not grow with the page (no row read twice)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory_portal.memory import services
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
    pages = [s for s in statements_five if "LIMIT" in s and "project_memory_entry" in s]
    assert pages, "\n".join(statements_five)
    page = pages[-1]
    assert '."embedding"' not in page and '."task_embedding"' not in page, page
    assert '."task_description"' not in page, page


@pytest.mark.django_db(transaction=True)
def test_a_repeated_search_is_answered_after_four_round_trips(api, tokens, world):
    """PostgreSQL, as a request runs, a query asked before (its vector and the candidates'
    rows cached): the token check that takes the run's slot and the call from its budget, the
    candidates' ids with whether the words match, the page and its read records, then the
    answer; the trace row with the slot given back goes after it."""
    if connection.vendor != "postgresql":
        pytest.skip("the round trips of PostgreSQL's search path")
    for i in range(8):
        services.note_write(
            actor=world.as_agent2, kind="fact", content=f"Release train {i} ships on Tuesday."
        )
    # The notes' vectors land after their commit (a background thread); rows still waiting
    # for theirs are read again by every search, so the search waits for them here.
    assert vectors.background.drain(timeout=60)
    _search(api, tokens.agent)  # stamps the token's last use, fills the caches
    with RoundTrips(connection) as sent:
        answer = api.tool("memory_search", tokens.agent, {"query": "release train"})
    assert answer.status_code == 200, answer.json()
    assert len(sent.before_answer) == 4, "\n".join(s[:160] for s in sent.trips)
    (check, ids, page, reads), (trace,) = sent.before_answer, sent.after_answer
    assert "memory_apitoken" in check and "INSERT INTO memory_run_slot" in check
    assert "UPDATE memory_run AS counted SET tool_calls" in check
    assert "text_match" in ids and "LIMIT" in page
    assert "project_memory_read" in reads
    assert "memory_toolcallcount" in trace and "DELETE FROM memory_run_slot" in trace
