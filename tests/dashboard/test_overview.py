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
    assert overview.recalls[-1].total == 1 and len(overview.most_recalled) == 1
    awaiting = sum(b.total for b in overview.backlog)
    assert awaiting == overview.backlog[0].total  # all written today
    vetoed = {p.key: p.count for bar in overview.judged for p in bar.parts}
    assert vetoed["vetoed"] == 2
    assert overview.cap_reached_on is not None
    assert overview.stored == Note.objects.filter(project=world.project).count()


def test_its_queries_do_not_grow_with_the_notes(world, manager_client):
    varied_notes(world, 6)
    with CaptureQueriesContext(connection) as few:
        assert manager_client.get(URL).status_code == 200
    varied_notes(world, 60, start=6)
    with CaptureQueriesContext(connection) as many:
        assert manager_client.get(URL).status_code == 200
    assert len(many) == len(few) <= 12, [q["sql"][:80] for q in many]


def test_every_chart_has_a_title_a_description_and_its_numbers(world, member_client):
    varied_notes(world, 6)
    html = member_client.get(URL).content.decode()
    figures = re.findall(r'<figure class="card chart".*?</figure>', html, re.S)
    assert len(figures) == 5
    for figure in figures:
        labelled = r'<svg [^>]*role="(img|group)" aria-labelledby="\w+-title \w+-desc"'
        assert re.search(labelled, figure) or "Nothing to show yet." in figure
        assert "<summary>The numbers</summary>" in figure and "<table" in figure
