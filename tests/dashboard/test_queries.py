"""List pages render with a fixed number of SQL queries however many rows they show."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from memory_portal.dashboard.tables import keyset_cursor
from memory_portal.memory import services
from memory_portal.memory.models import AuditEvent

from .conftest import day_log_yesterday, save_fact, write_note

SLUG = "acme-web"
# Session, user, the project with its setting and the person's role, the agents and the
# applications of the filter form, the setting's counters, the page's count, its ids and its
# rows: 9. Then one query each for the applications, the owning agents and the evidence
# repositories the page's rows name (selectors/notes.py, ROW_FETCHED), whatever the number of
# rows; and one for the rows' blast radius (selectors/reach.py, each note's newest reads of the
# last 30 days with their runs): 13 at most. (No evidence repository here: 12.)
PROJECT_MEMORY_QUERIES = 13


def varied_notes(world, count: int, start: int = 0) -> None:
    """Notes in every state a row can show: agent and person writes, reviewed, vetoed,
    superseded, forgotten (with its recovery), expiring, an application's."""
    for i in range(start, start + count):
        match i % 6:
            case 0 if i % 12:
                write_note(world, f"Plain learned note {i}", tags=["a", "b"], step="plan")
            case 0:
                write_note(world, f"Application note {i}", scope="application")
            case 1:
                note = write_note(world, f"Approved note {i}")
                services.note_approve(actor=world.as_manager, note_id=note.pk)
            case 2:
                note = write_note(world, f"Vetoed note {i}")
                services.note_veto(actor=world.as_member, note_id=note.pk)
            case 3:
                fact = save_fact(
                    world, f"Person fact {i}", expires_at=timezone.now() + timedelta(days=3)
                )
                services.note_edit(
                    actor=world.as_member, note_id=fact.pk, content=f"Edited fact {i}"
                )
            case 4:
                note = write_note(world, f"Forgotten note {i}")
                services.note_forget(actor=world.as_manager, note_id=note.pk)
            case 5:
                services.note_write(
                    actor=world.as_agent2, kind="lesson", content=f"Other agent {i}"
                )


def count_queries(client, url, django_assert_max_num_queries, bound):
    with django_assert_max_num_queries(bound) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return len(captured.captured_queries), response.content.decode()


@pytest.mark.parametrize("persona", ["manager", "member"])
def test_project_memory_page_queries_do_not_grow_with_rows(
    world, persona, django_assert_max_num_queries
):
    from .conftest import client_for

    client = client_for(getattr(world, persona))
    url = reverse("dashboard:project", args=[SLUG]) + "?per_page=50"
    varied_notes(world, 5)
    few, html = count_queries(client, url, django_assert_max_num_queries, PROJECT_MEMORY_QUERIES)
    assert html.count('class="note-row') >= 5
    varied_notes(world, 60, start=100)
    many, html = count_queries(client, url, django_assert_max_num_queries, PROJECT_MEMORY_QUERIES)
    assert html.count('class="note-row') == 50
    assert many == few


def test_filtered_and_sorted_page_has_the_same_bound(
    world, manager_client, django_assert_max_num_queries
):
    varied_notes(world, 30)
    url = reverse("dashboard:project", args=[SLUG]) + "?status=archived&sort=-recalls&tag=a&q=note"
    count_queries(manager_client, url, django_assert_max_num_queries, PROJECT_MEMORY_QUERIES)


@pytest.mark.parametrize(
    "page", ["review", "recoveries", "agents", "agent", "runs", "run", "audit"]
)
def test_other_list_pages_are_bounded(world, manager_client, django_assert_max_num_queries, page):
    def url():
        match page:
            case "agent":
                return reverse("dashboard:agent", args=[SLUG, world.agent.pk])
            case "run":
                return reverse("dashboard:run", args=[SLUG, world.run.pk])
            case "audit":
                return reverse("dashboard:audit")
            case _:
                return reverse(f"dashboard:{page}", args=[SLUG])

    varied_notes(world, 6)
    day_log_yesterday(world, ["one", "two"])
    few = count_queries(manager_client, url(), django_assert_max_num_queries, 25)[0]
    varied_notes(world, 40, start=100)
    many = count_queries(manager_client, url(), django_assert_max_num_queries, 25)[0]
    assert many == few, page


# A veto or its undo over htmx, re-render included (21 and 22 on SQLite before the service
# loaded and authorised alone): session, user, the project with its setting and the person's
# role (one query, the role remembered for the request), savepoint, the setting-row lock, the
# note read once under the lock (with any live twin, for the undo), its update, the revision
# bump, the audit row, the outbox's event (its number rides on the bump) with, for a veto, the
# note's readers counted (one query down its newest reads, with their runs),
# release; then the blast radius the toast names (the runs served the note in the last 30 days,
# one query), the counters (one grouped count) and the redrawn row with its own blast radius.
NOTE_ACTION_QUERIES = 16
# PostgreSQL sends two more: the bounded lock wait sets statement_timeout around the lock
# (memory/fastsql.py, bounded_lock_wait); they are settings, counted apart.
LOCK_WAIT_SETTINGS = 2


@pytest.mark.parametrize("verb", ["veto", "undo"])
def test_a_veto_and_its_undo_stay_within_sixteen_statements(world, manager_client, verb):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from .conftest import HTMX

    note = write_note(world, "The cache warm-up takes four minutes after a deploy")
    if verb == "undo":
        services.note_veto(actor=world.as_manager, note_id=note.pk)
    url = reverse(f"dashboard:note-{verb}", args=[SLUG, note.pk])
    with CaptureQueriesContext(connection) as captured:
        response = manager_client.post(url, **HTMX)
    assert response.status_code == 200
    assert f'id="note-{note.pk}"' in response.content.decode()
    sqls = [q["sql"] for q in captured.captured_queries]
    settings = [sql for sql in sqls if sql.startswith("SET LOCAL statement_timeout")]
    statements = [sql for sql in sqls if sql not in settings]
    assert len(statements) <= NOTE_ACTION_QUERIES, "\n".join(statements)
    expected = LOCK_WAIT_SETTINGS if connection.vendor == "postgresql" else 0
    assert len(settings) == expected
    note.refresh_from_db()
    assert note.is_vetoed == (verb == "veto")


@pytest.mark.parametrize(
    "query",
    ["?project=acme-web", "?actor=acme-web-member", "?date_from=2020-01-01", "?action=note."],
)
def test_audit_filters_and_deep_pages_are_bounded(
    world, manager_client, django_assert_max_num_queries, query
):
    """Each filter and a page found by its cursor: the same statements at 10 rows or 100,
    none of them a COUNT."""
    url = reverse("dashboard:audit") + query
    varied_notes(world, 6)
    few, html = count_queries(manager_client, url, django_assert_max_num_queries, 8)
    varied_notes(world, 60, start=100)
    many, html = count_queries(manager_client, url, django_assert_max_num_queries, 8)
    assert many == few
    older = keyset_cursor(AuditEvent.objects.order_by("-created_at", "-id")[5])
    with django_assert_max_num_queries(8) as captured:
        response = manager_client.get(url + ("&" if "?" in url else "?") + f"before={older}")
    assert response.status_code == 200 and "Newer" in response.content.decode()
    assert len(captured.captured_queries) == many
    assert not any("COUNT(" in q["sql"].upper() for q in captured.captured_queries)


def test_runs_page_counts_only_its_own_runs(world, manager_client, django_assert_max_num_queries):
    """The runs list counts the notes of the page's runs after the LIMIT (one grouped query),
    and sorting by that count still works."""
    url = reverse("dashboard:runs", args=[SLUG])
    varied_notes(world, 6)
    few, _ = count_queries(manager_client, url, django_assert_max_num_queries, 12)
    for _ in range(60):
        services.run_create(actor=None, agent=world.agent)
    many, html = count_queries(manager_client, url, django_assert_max_num_queries, 12)
    assert many == few and html.count('data-label="Notes written"') == 50
    sorted_html = count_queries(
        manager_client, url + "?sort=-notes_written", django_assert_max_num_queries, 12
    )[1]
    first = sorted_html.split('data-label="Notes written">', 1)[1].split("<", 1)[0]
    assert int(first) >= 1


def test_the_projects_list_reads_stored_counters_in_constant_statements(
    make_user, client, django_assert_max_num_queries
):
    """A superuser's projects list (`/`): the same statements for 1 project or 20, and none
    of them counts notes (issue "Fast at a million notes": the stored counters)."""
    from tests.conftest import build_world

    admin = make_user("root", superuser=True)
    client.force_login(admin)

    def statements() -> tuple[int, str]:
        with django_assert_max_num_queries(4) as captured:
            response = client.get(reverse("dashboard:projects"))
        assert response.status_code == 200
        assert not any("COUNT(" in q["sql"].upper() for q in captured.captured_queries)
        return len(captured.captured_queries), response.content.decode()

    first = build_world(make_user, slug="proj-0")
    save_fact(first, "One stored fact")
    write_note(first, "One shared note")
    one, html = statements()
    assert html.count("project-card") == 1 and "<strong>2</strong>" in html
    for i in range(1, 20):
        build_world(make_user, slug=f"proj-{i}")
    twenty, html = statements()
    assert html.count("project-card") == 20
    assert twenty == one


@pytest.mark.postgres
def test_the_filters_dropdowns_open_no_server_side_cursor(client, world):
    """The application dropdown reads its rows in one plain query: Django's iterator() would
    open a server-side cursor (DECLARE, FETCH, CLOSE) on every notes page."""
    from django.db import connection

    cursors: list[str] = []

    def record(execute, sql, params, many, context):
        cursors.append(type(context["cursor"].cursor).__name__)
        return execute(sql, params, many, context)

    client.force_login(world.manager)
    with connection.execute_wrapper(record):
        response = client.get(reverse("dashboard:project", args=[SLUG]))
    assert response.status_code == 200 and b'value="storefront"' in response.content
    assert cursors and not [c for c in cursors if "Server" in c], cursors


def test_the_read_lists_of_a_note_and_a_run_do_not_grow_with_reads(
    world, manager_client, django_assert_max_num_queries
):
    from memory_portal.memory.models import NoteRead

    note = write_note(world, "The cache warm-up takes four minutes after a deploy")
    other = write_note(world, "Deploys go out on Tuesdays")

    def read_by(runs: int) -> None:
        for _ in range(runs):
            run = services.run_create(actor=None, agent=world.agent2)
            for rank, read in enumerate((note, other), start=1):
                NoteRead.objects.create(
                    note=read, run=run, tool="search", rank=rank, trust=read.trust
                )
                NoteRead.objects.create(
                    note=read, run=world.run2, tool="read", rank=1, trust="learned"
                )

    urls = [
        reverse("dashboard:note", args=[SLUG, note.pk]),
        reverse("dashboard:run", args=[SLUG, world.run2.pk]),
    ]
    read_by(3)
    few = [count_queries(manager_client, u, django_assert_max_num_queries, 40) for u in urls]
    read_by(30)
    services.note_veto(actor=world.as_manager, note_id=other.pk)
    many = [count_queries(manager_client, u, django_assert_max_num_queries, 40) for u in urls]
    assert [n for n, _ in many] == [n for n, _ in few]
    assert "Read by 34 runs of 1 agent" in many[0][1]
    assert many[1][1].count("vetoed since") == 10  # 20 a page, half of them the vetoed note
