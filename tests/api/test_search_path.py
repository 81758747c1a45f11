"""`memory_search` as a request runs it: the page is read with the columns its answer shows
(no stored vectors), and its statements do not grow with the page (no row read twice)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory_portal.memory import services

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
