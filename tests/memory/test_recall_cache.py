"""The recall cache (memory/recall/cache.py; docs/RECALL.md, "Speed"): an unchanged memory is
scored from the cache, any change through the services is seen by the next recall, a row
`memory_embed` may still rewrite is never kept, and the cache stays within its bounds."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from io import StringIO
from types import SimpleNamespace

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory_portal.memory import services
from memory_portal.memory.models import Kind, MemorySetting, Note
from memory_portal.memory.recall.cache import FactCache, fact_cache
from memory_portal.memory.recall.facts import live_fact_rows, own_notes
from memory_portal.memory.recall.service import recall, score_facts
from memory_portal.memory.selectors import AgentView
from tests.conftest import build_world

# Every note here has its vector stored when written (as the background thread does).
pytestmark = pytest.mark.usefixtures("stored_vectors")

QUERY = "Why does the staging deploy fail without the VPN?"
FACTS = [
    "The staging deploy needs the VPN on",
    "Ana prefers squash merges on the billing repo",
    "Twilio drops SMS to German numbers without an error",
]


@pytest.fixture(autouse=True)
def _embeddings_on(settings):
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "EMBEDDINGS_ENABLED": True}


def _cached(world) -> object:
    """The facts a recall of `world.as_agent` scores now, through the cache."""
    setting = MemorySetting.objects.get(project=world.project)
    view = AgentView.of_run(world.run, setting=setting)
    return live_fact_rows(view, timezone.now(), project=world.project, revision=setting.revision)


def _uncached(world) -> list:
    return list(live_fact_rows(AgentView.of_run(world.run), timezone.now()))


def _live(world):
    return own_notes(AgentView.of_run(world.run), Kind.FACT, timezone.now()).order_by(
        "-created_at", "-id"
    )


def _picks(world) -> list[tuple[str, float | None]]:
    result = recall(actor=world.as_agent, query=QUERY, mark=False)
    return [(p.note.id, p.score) for p in result.memories]


def test_an_unchanged_memory_is_scored_from_the_cache(world):
    for text in FACTS:
        services.fact_save(actor=world.as_agent, text=text)
    first = _cached(world)
    assert list(first) == _uncached(world)
    again = _cached(world)
    assert again is first  # the same set: its scorer and vector matrix are kept
    assert score_facts(QUERY, again) == score_facts(QUERY, _uncached(world))
    with CaptureQueriesContext(connection) as queries:
        _cached(world)
    assert len(queries) == 2  # the setting (revision, policy), then the live facts' ids only
    assert "summary" not in queries[1]["sql"] and "embedding" not in queries[1]["sql"]


def _as_without_the_cache(world) -> list[tuple[str, float | None]]:
    """The recall's picks through the warm cache, checked against a recall with it empty."""
    cached = _picks(world)
    fact_cache.clear()
    assert _picks(world) == cached
    return cached


def test_every_change_through_the_services_is_seen(world):
    vpn = services.fact_save(actor=world.as_agent, text=FACTS[0]).note
    assert [i for i, _ in _as_without_the_cache(world)] == [vpn.pk]
    twin = services.fact_save(actor=world.as_agent, text="Deploying to staging requires the VPN")
    assert {f.id for f in _cached(world)} == {vpn.pk, twin.note.pk}
    _as_without_the_cache(world)
    services.note_archive(actor=world.as_agent, note_id=vpn.pk, reason="stale")
    assert vpn.pk not in [i for i, _ in _as_without_the_cache(world)]
    edited = services.note_edit(
        actor=world.as_member, note_id=twin.note.pk, content="Ana prefers squash merges"
    ).note
    assert [f.content for f in _cached(world)] == [edited.content]
    assert _as_without_the_cache(world) == []


def test_an_expired_fact_leaves_at_once_without_a_change_of_revision(world):
    vpn = services.fact_save(actor=world.as_agent, text=FACTS[0]).note
    services.fact_save(actor=world.as_agent, text=FACTS[1])
    assert len(_cached(world)) == 2
    revision = MemorySetting.objects.get(project=world.project).revision
    Note.objects.filter(pk=vpn.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert MemorySetting.objects.get(project=world.project).revision == revision
    assert [f.content for f in _cached(world)] == [FACTS[1]]
    assert _picks(world) == []


def test_a_row_without_a_stored_vector_is_read_again_until_memory_embed_stores_one(world):
    vpn = services.fact_save(actor=world.as_agent, text=FACTS[0]).note
    services.fact_save(actor=world.as_agent, text=FACTS[1])
    Note.objects.filter(pk=vpn.pk).update(embedding=None, embedding_model="")
    fact_cache.clear()
    expected = _picks(world)
    assert [f.embedding is None for f in _cached(world)] == [False, True]
    assert _cached(world) is not _cached(world)  # not kept: read again
    call_command("memory_embed", stdout=StringIO())  # stores it, the revision unmoved
    assert all(f.embedding is not None for f in _cached(world))
    assert [i for i, _ in _picks(world)] == [i for i, _ in expected]


def test_the_cache_keeps_within_its_bounds(world, make_user):
    other = build_world(make_user, slug="other-web")
    for w in (world, other):
        for text in FACTS:
            services.fact_save(actor=w.as_agent, text=text)
    cache = FactCache(projects=1, facts=3)
    for w in (world, other, world):
        revision = MemorySetting.objects.get(project=w.project).revision
        facts = cache.facts(w.project, revision, _live(w))
        assert len(facts) == 3
        assert len(cache._tables) == 1 and cache._held <= 3
    project_key = (world.project.pk, world.project.created_at)
    assert list(cache._tables) == [project_key]
    assert all(key[0] == project_key for key in cache._sets)


def test_an_older_revision_is_served_but_not_kept(world):
    for text in FACTS:
        services.fact_save(actor=world.as_agent, text=text)
    revision = MemorySetting.objects.get(project=world.project).revision
    live = _live(world)
    cache = FactCache()
    current = cache.facts(world.project, revision, live)
    older = cache.facts(world.project, revision - 1, live)
    assert list(older) == list(current)
    assert cache.facts(world.project, revision, live) is current
    assert cache._tables[(world.project.pk, world.project.created_at)][0] == revision


class _Live:
    """A stand-in for the live facts' queryset: rows as `values_list` gives them."""

    def __init__(self, rows: list[tuple]) -> None:
        self.rows = rows

    def values_list(self, *fields, flat: bool = False) -> list:
        return [r[0] for r in self.rows] if flat else list(self.rows)


def test_the_cache_is_consistent_under_threads(settings):
    """Threads recalling projects at moving revisions always get the rows of their revision,
    and the cache's count of what it holds stays true and within its bounds."""
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "EMBEDDINGS_ENABLED": False}
    now = timezone.now()
    projects = [SimpleNamespace(pk=p, created_at=now) for p in range(3)]

    def rows(project: int, revision: int) -> list[tuple]:
        n = 5 + (revision % 4)
        return [(f"mem_{project}_{revision}_{i}", "", f"fact {i}", now, None, "") for i in range(n)]

    cache = FactCache(projects=2, facts=20)

    def work(seed: int) -> None:
        for step in range(300):
            project, revision = (seed + step) % 3, step // 30
            live = _Live(rows(project, revision))
            got = cache.facts(projects[project], revision, live)
            assert [f.id for f in got] == [r[0] for r in live.rows]

    with ThreadPoolExecutor(max_workers=6) as pool:
        for future in [pool.submit(work, seed) for seed in range(6)]:
            future.result()
    assert len(cache._tables) <= 2
    assert cache._held == sum(len(f) for f in cache._sets.values()) <= 20
