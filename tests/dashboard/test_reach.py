"""The blast radius before and after a veto, a reject or a forget (SPEC §2.10): a row says how
many runs were served the note in the last 30 days and how many still run; the note's page says
it beside its verbs; the bulk bar asks for the selection's; the toast after the change says it
again and links to the Runs page filtered on those notes."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from memory_portal.memory import services
from memory_portal.memory.actors import Actor
from memory_portal.memory.models import NoteRead, RunStatus

from .conftest import HTMX

pytestmark = pytest.mark.django_db

SLUG = "acme-web"


def served(world, run, *notes) -> None:
    """`run` is served `notes` as memory_search serves them (the one place reads are recorded)."""
    services.reads_record(
        actor=Actor.agent_run(run), tool="search", served=[(n.pk, n.trust, None) for n in notes]
    )


@pytest.fixture
def notes(world):
    write = services.note_write
    first = write(actor=world.as_agent, kind="fact", content="Previews live for 72 hours.").note
    second = write(actor=world.as_agent, kind="fact", content="Staging deploys at noon.").note
    return first, second


def toast_of(response) -> dict:
    return json.loads(response["HX-Trigger"])["toast"]


def test_a_row_shows_who_was_served_the_note_before_its_veto(world, manager_client, notes):
    first, second = notes
    served(world, world.run2, first)
    served(world, world.run, first, second)
    world.run.status = RunStatus.SUCCEEDED
    world.run.save(update_fields=["status"])

    page = manager_client.get(f"/p/{SLUG}/").content.decode()
    row = page[page.index(f'id="note-{first.pk}"') :]
    row = row[: row.index("</tr>")]
    assert f'id="reach-{first.pk}"' in row and "Read by 2 runs · 1 running" in row
    assert f'aria-describedby="reach-{first.pk}"' in row  # the veto and reject name it
    assert f"/p/{SLUG}/runs/?read={first.pk}" in row
    second_row = page[page.index(f'id="note-{second.pk}"') :]
    assert "Read by 1 run<" in second_row[: second_row.index("</tr>")]


def test_reads_older_than_thirty_days_are_not_the_blast_radius(world, manager_client, notes):
    first, _ = notes
    served(world, world.run2, first)
    NoteRead.objects.update(read_at=timezone.now() - timedelta(days=31))
    page = manager_client.get(f"/p/{SLUG}/").content.decode()
    assert f'id="reach-{first.pk}"' not in page
    note_page = manager_client.get(f"/p/{SLUG}/notes/{first.pk}/").content.decode()
    assert "Before you veto" not in note_page
    assert "Read by 1 run of 1 agent" in note_page  # still listed: it is kept 90 days


def test_the_veto_toast_names_the_blast_radius_and_links_to_those_runs(
    world, manager_client, notes
):
    first, _ = notes
    served(world, world.run2, first)
    response = manager_client.post(f"/p/{SLUG}/notes/{first.pk}/veto/", **HTMX)
    toast = toast_of(response)
    assert toast["message"].endswith(
        "It was served to 1 run of 1 agent in the last 30 days; 1 still running."
    )
    assert toast["link"] == {"url": f"/p/{SLUG}/runs/?read={first.pk}", "label": "See the run"}
    assert toast["undo"]["label"] == "Undo"

    runs = manager_client.get(toast["link"]["url"]).content.decode()
    assert world.run2.pk in runs and world.run.pk not in runs
    assert "Runs served note" in runs


def test_a_note_nobody_read_gets_no_blast_radius(world, manager_client, notes):
    first, _ = notes
    response = manager_client.post(f"/p/{SLUG}/notes/{first.pk}/reject/", **HTMX)
    assert toast_of(response)["message"].endswith("agents will not be served it.")
    assert toast_of(response)["link"] is None
    runs = manager_client.get(f"/p/{SLUG}/runs/", {"read": first.pk}).content.decode()
    assert "No run was served this note in the last 30 days." in runs


def test_the_note_page_says_it_beside_the_verbs_and_the_forget_panel_too(
    world, manager_client, notes
):
    first, _ = notes
    served(world, world.run2, first)
    page = manager_client.get(f"/p/{SLUG}/notes/{first.pk}/").content.decode()
    assert (
        "Before you veto, reject or forget it: this note was served to 1 run of 1 agent in the "
        "last 30 days; 1 still running."
    ) in page
    panel = manager_client.get(f"/p/{SLUG}/notes/{first.pk}/more/form/", **HTMX).content.decode()
    assert "It was served to 1 run of 1 agent in the last 30 days; 1 still running." in panel


def test_the_bulk_bar_asks_for_the_selection_blast_radius_once_per_run(
    world, manager_client, notes
):
    first, second = notes
    served(world, world.run2, first, second)
    served(world, world.run2, first)
    answer = manager_client.get(
        f"/p/{SLUG}/notes/reach/", {"ids": [first.pk, second.pk, "mem_nope", "'; drop"]}
    )
    assert answer.json() == {
        "runs": 1,
        "said": "The selected notes were served to 1 run of 1 agent in the last 30 days; "
        "1 still running.",
    }
    nobody = manager_client.get(f"/p/{SLUG}/notes/reach/", {"ids": ["mem_nope"]}).json()
    assert nobody == {"runs": 0, "said": ""}

    response = manager_client.post(
        f"/p/{SLUG}/notes/bulk/", {"action": "veto", "ids": [first.pk, second.pk]}, **HTMX
    )
    toast = toast_of(response)
    assert "They were served to 1 run of 1 agent" in toast["message"]
    assert toast["link"]["url"] == f"/p/{SLUG}/runs/?read={first.pk}&read={second.pk}"
    runs = manager_client.get(toast["link"]["url"]).content.decode()
    assert "Runs served any of 2 notes in the last 30 days." in runs and world.run2.pk in runs


def test_the_blast_radius_is_the_projects_own(world, notes, outsider_client):
    first, _ = notes
    served(world, world.run2, first)
    assert outsider_client.get(f"/p/{SLUG}/notes/reach/", {"ids": [first.pk]}).status_code == 404
    assert outsider_client.get(f"/p/{SLUG}/runs/", {"read": first.pk}).status_code == 404


def test_a_note_read_more_than_the_sample_says_at_least(world, manager_client, notes, monkeypatch):
    """A reach counts a note's newest REACH_SAMPLE reads (its cost stays bounded however often
    the note is read): past that it says "at least", wherever it is shown."""
    from memory_portal.memory import selectors
    from memory_portal.memory.selectors import reach as reach_module

    monkeypatch.setattr(reach_module, "REACH_SAMPLE", 3)
    monkeypatch.setattr(reach_module, "ROW_SAMPLE", 3)
    first, second = notes
    runs = [services.run_create(actor=None, agent=world.agent2) for _ in range(4)]
    for run in runs:  # oldest first: the newest three runs are what the sample holds
        served(world, run, first)
    served(world, world.run2, second)

    assert selectors.note_reach(note_id=first.pk) == selectors.Reach(
        3, 1, 3, tuple(sorted(r.pk for r in runs[1:])), at_least=True
    )
    rows = selectors.notes_reach([first.pk, second.pk])
    assert (rows[first.pk].runs, rows[first.pk].at_least) == (3, True)
    assert (rows[second.pk].runs, rows[second.pk].at_least) == (1, False)
    both = selectors.reach_of([first.pk, second.pk])
    assert (both.runs, both.at_least) == (4, True)
    assert both.sentence().startswith("served to at least 4 runs of 1 agent")

    page = manager_client.get(f"/p/{SLUG}/").content.decode()
    assert "Read by 3+ runs · 3 running" in page
    listed = manager_client.get(f"/p/{SLUG}/runs/", {"read": first.pk}).content.decode()
    assert runs[0].pk not in listed and all(r.pk in listed for r in runs[1:])
