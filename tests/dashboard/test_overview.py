"""The overview: its numbers are what the notes table lists behind each link, its queries do
not grow with the notes, and every chart has a title, a description and its numbers' table."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape
from urllib.parse import parse_qsl, urlsplit

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory_portal.memory import services
from memory_portal.memory.models import Note
from memory_portal.memory.selectors import project_overview

from .conftest import write_note
from .test_queries import varied_notes

SLUG = "acme-web"
URL = f"/p/{SLUG}/overview/"


def test_every_link_lists_what_its_segment_counts(world, manager_client):
    varied_notes(world, 24)
    old = write_note(world, "Written three weeks ago")
    Note.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=20))
    services.notes_mark_recalled(project=world.project, note_ids=[old.pk])
    page = manager_client.get(URL)
    assert page.status_code == 200
    html = page.content.decode()
    bar = (
        r'<a href="([^"]+)" aria-label="[^"]+">'
        r'<rect class="bar [^"]+"[^>]*><title>([^<]+)</title>'
    )
    links = re.findall(bar, html)
    assert len(links) >= 8
    for href, title in links:
        count = int(unescape(title).rsplit(" ", 1)[1])
        path, query = urlsplit(unescape(href))[2:4]
        assert path == f"/p/{SLUG}/"
        listed = manager_client.get(f"{path}?{query}&per_page=100")
        assert listed.context["table"].paginator.count == count, (title, dict(parse_qsl(query)))


def test_the_numbers(world):
    varied_notes(world, 12)
    services.notes_mark_recalled(project=world.project, note_ids=[Note.objects.first().pk])
    overview = project_overview(actor=world.as_manager, project=world.project)
    assert sum(bar.total for bar in overview.written) == overview.written_in_window
    assert overview.written_in_window == Note.objects.filter(project=world.project).count()
    assert sum(b.total for b in overview.trust) == overview.written_in_window
    assert overview.recalls[-1].total == 1
    assert overview.most_read == [] and overview.unread_learned_count == 0  # all new, none read
    awaiting = sum(b.total for b in overview.backlog)
    assert awaiting == overview.backlog[0].total  # all written today
    vetoed = {p.key: p.count for bar in overview.judged for p in bar.parts}
    assert vetoed["vetoed"] == 2
    assert overview.cap_reached_on is not None
    assert overview.stored == Note.objects.filter(project=world.project).count()


def test_its_queries_do_not_grow_with_the_notes(world, manager_client):
    """Twelve before the read records; a thirteenth counts the notes served to the most runs
    (their names and the oldest unread learned notes are read only when there are some)."""
    varied_notes(world, 6)
    with CaptureQueriesContext(connection) as few:
        assert manager_client.get(URL).status_code == 200
    varied_notes(world, 60, start=6)
    with CaptureQueriesContext(connection) as many:
        assert manager_client.get(URL).status_code == 200
    assert len(many) == len(few) <= 13, [q["sql"][:80] for q in many]


def test_every_chart_has_a_title_a_description_and_its_numbers(world, member_client):
    varied_notes(world, 6)
    html = member_client.get(URL).content.decode()
    figures = re.findall(r'<figure class="card chart".*?</figure>', html, re.S)
    assert len(figures) == 5
    for figure in figures:
        labelled = r'<svg [^>]*role="(img|group)" aria-labelledby="\w+-title \w+-desc"'
        assert re.search(labelled, figure) or "Nothing to show yet." in figure
        assert "<summary>The numbers</summary>" in figure and "<table" in figure


def test_the_notes_served_to_most_runs_and_the_learned_ones_nobody_read(
    world, manager_client
):
    """Read records feed the overview: the notes served to the most runs in 30 days, and the
    learned notes older than 30 days no run was served since — listed by the same filter the
    review queue's section and the daily review use."""
    from memory_portal.memory.actors import Actor

    popular, used, idle, fresh = (
        write_note(world, text)
        for text in ("Popular fact", "Used fact", "Idle learned fact", "Fresh learned fact")
    )
    month_ago = timezone.now() - timedelta(days=40)
    Note.objects.filter(pk__in=[popular.pk, used.pk, idle.pk]).update(created_at=month_ago)
    for run in (world.run, world.run2):
        services.reads_record(
            actor=Actor.agent_run(run), tool="search", served=[(popular.pk, "learned", None)]
        )
    services.reads_record(
        actor=Actor.agent_run(world.run), tool="read", served=[(used.pk, "learned", None)]
    )
    services.reads_record(  # served to a run, but 31 days ago: not lately
        actor=Actor.agent_run(world.run2),
        tool="read",
        served=[(idle.pk, "learned", None)],
        now=timezone.now() - timedelta(days=31),
    )

    overview = project_overview(actor=world.as_manager, project=world.project)
    assert [(n.pk, n.read_runs) for n in overview.most_read] == [(popular.pk, 2), (used.pk, 1)]
    assert [n.pk for n in overview.unread_learned] == [idle.pk]  # `fresh` is not 30 days old
    assert overview.unread_learned_count == 1

    html = manager_client.get(URL).content.decode()
    assert "Served to the most runs in 30 days" in html and "2 runs" in html
    listed = manager_client.get(f"/p/{SLUG}/?{overview.unread_query}&per_page=100")
    assert [row.record.pk for row in listed.context["table"].page.object_list] == [idle.pk]
    assert fresh.pk not in html
