"""The notes table's row (templates/jinja2/dashboard/note_rows.html, drawn by the
`{% note_rows %}` tag) in every state a note can be in, for a manager and for a member: what
each state shows and which actions each role is offered. The row's Jinja2 environment fails on
any name it is not given, so drawing every branch here also checks nothing is missing."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from django.conf import settings
from django.template import defaultfilters
from django.urls import reverse
from django.utils import timezone

from memory_portal.dashboard.jinja import date_filter
from memory_portal.dashboard.tables import NoteTable
from memory_portal.memory import services
from memory_portal.memory.models import Note

from .conftest import client_for, save_fact, write_note

SLUG = "acme-web"


def _row(html: str, note_id: str) -> str:
    match = re.search(rf'<tr id="note-{note_id}".*?</tr>', html, re.S)
    assert match, f"no row for {note_id}"
    return match.group(0)


def _buttons(row: str) -> set[str]:
    """The row's actions: its buttons and the panel ("More") it opens."""
    buttons = re.findall(r'<button form="row-actions"[^>]*>([^<]+)</button>', row)
    panels = re.findall(r'<a href="[^"]+" class="btn" data-panel="[a-z]+"[^>]*>([^<]+)</a>', row)
    return set(buttons) | set(panels)


def _more(client, note) -> set[str]:
    """The verbs of a row's "More" panel (edit, archive, forget), as the panel loads them."""
    url = f"/p/{SLUG}/notes/{note.pk}/more/form/"
    answer = client.get(url, HTTP_HX_REQUEST="true")
    if answer.status_code == 404:
        return set()
    html = answer.content.decode()
    return set(re.findall(rf'action="/p/{SLUG}/notes/{note.pk}/([a-z]+)/"', html))


def _offered(client, row: str, note) -> set[str]:
    """Everything a row offers: its buttons, and the verbs of its "More" panel."""
    buttons = _buttons(row)
    more = _more(client, note) if "More" in buttons else set()
    return (buttons - {"More"}) | {v.capitalize() for v in more}


@pytest.fixture
def states(world):
    """One note in each state, written through the services."""
    notes = {}
    notes["learned"] = write_note(world, "The deploy runs from the main branch only")
    notes["reviewed"] = write_note(world, "Staging restores nightly at two in the morning")
    services.note_approve(actor=world.as_manager, note_id=notes["reviewed"].pk)
    notes["rejected"] = write_note(world, "The cache is flushed every minute")
    services.note_reject(actor=world.as_manager, note_id=notes["rejected"].pk)
    notes["vetoed"] = write_note(world, "Production passwords live in the wiki")
    services.note_veto(actor=world.as_member, note_id=notes["vetoed"].pk)
    notes["archived"] = write_note(world, "The old queue ran on a cron of its own")
    services.note_archive(
        actor=world.as_manager, note_id=notes["archived"].pk, reason="Queue <retired> & gone"
    )
    notes["superseded"] = write_note(world, "Builds take four minutes")
    notes["edit"] = services.note_edit(
        actor=world.as_manager, note_id=notes["superseded"].pk, content="Builds take six minutes"
    ).note
    notes["forgotten"] = write_note(world, "A customer's name was written here")
    services.note_forget(actor=world.as_manager, note_id=notes["forgotten"].pk)
    notes["fact"] = save_fact(world, "Answer in British English\nand keep it short")
    notes["long"] = write_note(world, "Long " + "word " * 60)
    services.notes_mark_recalled(
        project=world.project,
        note_ids=[notes["learned"].pk],
        now=datetime(2026, 3, 4, 5, 6, tzinfo=UTC),
    )
    return notes


@pytest.mark.parametrize("who", ["manager", "member"])
def test_every_state_draws_its_row(who, states, world, manager_client, member_client):
    client = manager_client if who == "manager" else member_client
    manager = who == "manager"
    html = client.get(f"/p/{SLUG}/?per_page=100").content.decode()
    html += client.get(f"/p/{SLUG}/?status=forgotten").content.decode()
    row = {name: _row(html, note.pk) for name, note in states.items()}

    def offered(name: str) -> set[str]:
        return _offered(client, row[name], states[name])

    learned = row["learned"]
    assert 'class="note-row status-active trust-learned"' in learned
    assert 'title="Last recalled 2026-03-04 05:06 UTC">1</span>' in learned
    assert _buttons(learned) == (
        {"Approve", "Reject", "Veto", "More"} if manager else {"Veto", "More"}
    )
    assert offered("learned") == (
        {"Approve", "Reject", "Veto", "Edit", "Archive", "Forget"}
        if manager
        else {"Veto", "Edit", "Archive"}
    )
    shortcut = 'aria-keyshortcuts="a"'
    assert shortcut in learned if manager else shortcut not in learned
    assert f'formaction="/p/{SLUG}/notes/{states["learned"].pk}/veto/"' in learned
    # No form in a row: its buttons post the page's one form (CSRF token and `next`).
    assert "<form" not in learned and 'name="csrfmiddlewaretoken"' not in learned
    assert html.count('<form id="row-actions" method="post" hidden>') == 2  # one a page
    # Never recalled: an empty cell (the stylesheet shows 0; a phone's card leaves it out).
    assert '<td class="c-num"></td>' in row["reviewed"]

    # A reviewed or rejected note is edited by a manager only; approve / reject what it is not.
    assert ("Approve" not in _buttons(row["reviewed"])) and (
        ("Reject" in _buttons(row["reviewed"])) == manager
    )
    assert ("Edit" in offered("rejected")) == manager
    assert ("Approve" in _buttons(row["rejected"])) == manager

    vetoed = row["vetoed"]
    assert "is-vetoed" in vetoed and "Vetoed</span>" in vetoed
    assert f"by {world.member.get_username()}</small>" in vetoed
    # A manager judges an archived note's trust too, and forgets it (access.note_actions).
    decided = {"Approve", "Reject", "Forget"}
    assert offered("vetoed") == ({"Undo"} | decided if manager else {"Undo"})

    archived = row["archived"]
    assert "Queue &lt;retired&gt; &amp; gone" in archived  # escaped, as every text
    assert offered("archived") == ({"Unarchive"} | decided if manager else {"Unarchive"})

    superseded = row["superseded"]
    assert f'superseded by <a href="/p/{SLUG}/notes/{states["edit"].pk}/"' in superseded
    assert "Unarchive" not in offered("superseded")
    assert f'<td class="c-prov">by {world.manager.get_username()}' in row["edit"]

    forgotten = row["forgotten"]
    assert "status-forgotten" in forgotten
    assert offered("forgotten") == ({"Restore"} if manager else set())

    fact = row["fact"]
    assert "Answer in British English<br>and keep it short" in fact
    assert f'href="/p/{SLUG}/agents/{world.agent.pk}/">{world.agent.name}</a>' in fact
    assert "exp. <time" in fact

    long = row["long"]
    assert '<details class="more"><summary>Long word' in long and "…</summary>" in long


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "America/St_Johns"])
def test_the_rows_date_filter_is_djangos(zone):
    """The row's `date` filter writes its formats by hand; it must write what Django's does,
    in the current time zone."""
    values = [
        datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
        datetime(2026, 12, 31, 23, 59, tzinfo=UTC),
        date(2026, 7, 8),
        None,
        "",
    ]
    with timezone.override(zone):
        for value in values:
            for fmt in ("Y-m-d", "Y-m-d H:i", "c", "D j M"):
                local = timezone.template_localtime(value) if value else value
                try:
                    expected = defaultfilters.date(local, fmt)
                except TypeError:  # a time format for a date: Django's error, and ours
                    with pytest.raises(TypeError):
                        date_filter(value, fmt)
                    continue
                assert date_filter(value, fmt) == expected, (value, fmt)


@pytest.mark.parametrize("role", ["manager", "member"])
def test_a_row_offers_what_access_note_actions_says(world, role):
    """The row's buttons are the rule's verbs, for every state and both roles."""
    from memory_portal.memory.access import note_actions

    from ..memory.test_note_actions import note_states

    client = client_for(world.manager if role == "manager" else world.member)
    notes = note_states(world)
    html = client.get(reverse("dashboard:project", args=[SLUG]) + "?per_page=100")
    html = html.content.decode()
    for name, note in notes.items():
        row = html[html.index(f'id="note-{note.pk}"') :]
        row = row[: row.index("</tr>")]
        offered = note_actions(note, manager=role == "manager")
        more = _more(client, note) if 'data-panel="more"' in row else set()
        assert bool(more) == ('data-panel="more"' in row)  # a "More" panel is never empty
        for verb in ("approve", "reject", "veto", "unarchive", "archive", "edit", "forget"):
            # a button posts to its URL; edit, archive and forget are in the "More" panel
            shown = verb in more if verb in ("edit", "archive", "forget") else (
                f"/notes/{note.pk}/{verb}/" in row
            )
            assert shown == (verb in offered and not (verb == "unarchive" and note.is_vetoed)), (
                role, name, verb,
            )  # fmt: skip
        assert (f"/notes/{note.pk}/undo/" in row) == ("undo" in offered and note.is_vetoed)
        assert ("/recoveries/" in row) == ("restore" in offered), (role, name)


def test_a_rows_cells_are_the_tables_columns(states, manager_client):
    """The columns are declared once, in NoteTable: the header and every row (on the notes
    page and the review queue) draw them in the same order, with the same class and label."""
    for path in (f"/p/{SLUG}/?per_page=100", f"/p/{SLUG}/review/"):
        html = manager_client.get(path).content.decode()
        head = re.search(r"<thead>.*?</thead>", html, re.S).group(0)
        ths = re.findall(r'<th scope="col" class="([^"]+)"[^>]*>(.*?)</th>', head, re.S)
        header = [  # the column's own class first; django-tables2 adds "orderable" and such
            (css.split()[0], re.sub(r"<[^>]+>|[▲▼]|\s+", " ", label).strip()) for css, label in ths
        ]
        assert [css for css, _ in header][:3] == ["c-id", "c-kind", "c-content"]
        rows = re.findall(r'<tr id="note-.*?</tr>', html, re.S)
        assert rows
        for row in rows:
            cells = re.findall(r'<td class="([^"]+)">', row)
            assert cells == ["c-select"] + [css for css, _ in header]
    # On a phone a cell's label is the stylesheet's, by the column's class: the header's.
    css = (Path(settings.BASE_DIR) / "static" / "dashboard" / "portal.css").read_text()
    rule = r'table\.notes-table td\.(c-[a-z]+)::before \{ content: "([^"]*)"; \}'
    labels = dict(re.findall(rule, css))
    for column in NoteTable.row_columns():
        if column.css in ("c-select", "c-content", "c-actions"):  # no label: seen for what it is
            assert re.search(rf"td\.{column.css}::before \{{ content: none; \}}", css), column
        else:
            assert labels.get(column.css) == column.label, column


def test_a_text_search_answers_by_relevance_with_the_words_marked(world, manager_client):
    from memory_portal.dashboard.jinja import marked, searched_terms

    apart = write_note(world, "The cache of staging is warm; its deploy is slow")
    phrase = write_note(world, "Deploy the cache before noon")
    summary = services.note_write(
        actor=world.as_agent, kind="fact", content="Warm it first", summary="Deploy the cache"
    ).note
    write_note(world, "Nothing to see here")
    html = manager_client.get(f"/p/{SLUG}/?q=deploy+the+cache").content.decode()
    order = [m for m in re.findall(r'<tr id="note-(mem_\w+)"', html)]
    assert order == [summary.pk, phrase.pk, apart.pk]
    # The words the ranker matched: "the" is no term; "deploys" is "deploy"'s.
    assert "<mark>Deploy</mark> the <mark>cache</mark> before noon" in html
    # A sorted column keeps its sort; the marks stay.
    sorted_html = manager_client.get(f"/p/{SLUG}/?q=cache&sort=created").content.decode()
    assert re.findall(r'<tr id="note-(mem_\w+)"', sorted_html)[0] == apart.pk
    # Matched on the text, escaped after: no mark inside an escaped character.
    amp = searched_terms("amp")
    assert str(marked("a & b's <amp>", amp)) == "a &amp; b&#x27;s &lt;<mark>amp</mark>&gt;"
    assert str(marked("Deploys go to docs", searched_terms("do deploy"))) == (
        "<mark>Deploys</mark> go to docs"
    )


def test_the_search_box_finds_by_meaning_with_the_filters_applying(
    world, manager_client, stored_vectors
):
    """The notes table's search ranks by the scorer recall uses (selectors.ranked_by_query):
    a note that shares no word with the question is found by its meaning; the other filters
    narrow what it ranks. (The demo's paraphrases: tests/browser, typed as a person would.)"""
    target = write_note(world, "Preview environments are deleted after 72 hours without a push")
    write_note(world, "Staging deploys take about eight minutes end to end")
    write_note(world, "The invoice PDF is rendered by the billing worker")
    query = "ephemeral review apps get removed when idle for three days"
    html = manager_client.get(f"/p/{SLUG}/", {"q": query}).content.decode()
    assert re.findall(r'<tr id="note-(mem_\w+)"', html)[0] == target.pk
    services.note_approve(actor=world.as_manager, note_id=target.pk)
    learned = manager_client.get(f"/p/{SLUG}/", {"q": query, "trust": "learned"})
    assert target.pk not in learned.content.decode()
    reviewed = manager_client.get(f"/p/{SLUG}/", {"q": query, "trust": "reviewed"})
    assert re.findall(r'<tr id="note-(mem_\w+)"', reviewed.content.decode()) == [target.pk]


def test_a_note_without_a_vector_is_found_by_its_words(world, manager_client):
    note = write_note(world, "The nightly export lands in the reports bucket")
    Note.objects.filter(pk=note.pk).update(embedding=None, embedding_model="")
    html = manager_client.get(f"/p/{SLUG}/", {"q": "nightly export"}).content.decode()
    assert re.findall(r'<tr id="note-(mem_\w+)"', html) == [note.pk]


def test_a_rows_panel_is_loaded_when_opened(world, states, manager_client, member_client):
    """The "More" panel comes from its own GET (htmx): a form for each of edit, archive and
    forget the rule allows, each with its CSRF token, the page to return to and the review
    section; without htmx the note's page, which has them all."""
    note = states["learned"]
    url = f"/p/{SLUG}/notes/{note.pk}/more/form/?section=learned"
    htmx = {"HTTP_HX_REQUEST": "true", "HTTP_HX_CURRENT_URL": f"http://testserver/p/{SLUG}/review/"}
    panel = manager_client.get(url, **htmx).content.decode()
    for verb in ("edit", "archive", "forget"):
        assert f'hx-post="/p/{SLUG}/notes/{note.pk}/{verb}/"' in panel, verb
    assert panel.count("<form") == 3 and panel.count('name="csrfmiddlewaretoken"') == 3
    assert f">{note.content}</textarea>" in panel and 'name="reason"' in panel
    assert panel.count(f'name="next" value="/p/{SLUG}/review/"') == 3
    assert panel.count('name="section" value="learned"') == 3
    plain = manager_client.get(url)
    assert plain.status_code == 302 and plain["Location"] == f"/p/{SLUG}/notes/{note.pk}/"
    # A member may not edit or forget a reviewed note: archive is all the panel holds.
    reviewed = states["reviewed"]
    assert _more(member_client, reviewed) == {"archive"}
    assert _more(member_client, states["forgotten"]) == set()  # nothing: 404
    assert manager_client.get(f"/p/{SLUG}/notes/{note.pk}/edit/form/", **htmx).status_code == 404


def test_fifty_rows_fit_the_pages_budget(world, manager_client):
    """A notes page of 50 rows is at most 120 KB (docs/PERFORMANCE.md, "Pages and endpoints
    at a million notes"): a row of an agent's note with a summary, a run, a step, its task key
    and tags, offered every button a manager gets, stays under 2 KB; the page around the rows
    under 20 KB."""
    for i in range(50):
        write_note(
            world,
            f"Note {i}: the deploy of the storefront runs from the main branch, after the "
            "release checklist and a green build of every service it touches.",
            summary=f"Deploys go out from main ({i})",
            tags=["deploy", "release"],
            step="implement",
        )
    page = manager_client.get(f"/p/{SLUG}/").content
    rows = re.findall(rb'<tr id="note-.*?</tr>', page, re.S)
    assert len(rows) == 50
    assert b'data-panel="more"' in rows[0] and b'aria-keyshortcuts="a"' in rows[0]
    assert b"PIN-42" in rows[0] and b'<span class="tag">release</span>' in rows[0]
    largest = max(len(row) for row in rows)
    assert largest <= 2_000, largest
    assert len(page) - sum(len(row) for row in rows) <= 20_000
    assert len(page) <= 120_000, len(page)


def test_the_sections_key_is_escaped_in_every_button(world):
    """A row's buttons carry its review section (`name="section"`), written once a row as an
    attribute marked safe: the key is escaped before it is, whatever it holds."""
    from memory_portal.dashboard.templatetags.note_rows import note_rows
    from memory_portal.memory import selectors
    from memory_portal.memory.models import Role

    note = write_note(world, "The section's key is escaped")
    rows = selectors.notes_rows(actor=world.as_manager, project=world.project, ids=[note.pk])
    context = {
        "access": selectors.ProjectAccess(project=world.project, role=Role.MANAGER),
        "project": world.project,
        "section_key": 'x" onclick="alert(1)',
    }
    html = note_rows(context, rows)
    # approve, reject and veto
    assert html.count('name="section" value="x&#34; onclick=&#34;alert(1)"') == 3
    assert 'data-section="x&#34; onclick=&#34;alert(1)"' in html
    assert 'onclick="' not in html
