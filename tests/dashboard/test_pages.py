"""Every dashboard page for the three personas: managers and members read, outsiders get 404
for anything of a project, anonymous visitors are sent to the login page."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from memory_portal.memory import services
from memory_portal.memory.models import Agent, AuditEvent, MemorySetting, Note

from .conftest import HTMX, client_for, day_log_yesterday, save_fact, write_note, write_notes

SLUG = "acme-web"


def project_pages(world, note, recovery_note=None):
    return {
        "project": reverse("dashboard:project", args=[SLUG]),
        "note": reverse("dashboard:note", args=[SLUG, note.pk]),
        "review": reverse("dashboard:review", args=[SLUG]),
        "recoveries": reverse("dashboard:recoveries", args=[SLUG]),
        "agents": reverse("dashboard:agents", args=[SLUG]),
        "agent": reverse("dashboard:agent", args=[SLUG, world.agent.pk]),
        "runs": reverse("dashboard:runs", args=[SLUG]),
        "run": reverse("dashboard:run", args=[SLUG, world.run.pk]),
        "settings": reverse("dashboard:settings", args=[SLUG]),
    }


@pytest.fixture
def note(world):
    return write_note(world, "The billing export runs at 02:00 UTC", tags=["billing", "cron"])


@pytest.mark.parametrize("persona", ["manager", "member"])
def test_members_read_every_project_page(world, note, persona):
    client = client_for(getattr(world, persona))
    for name, url in project_pages(world, note).items():
        response = client.get(url)
        assert response.status_code == 200, name
        assert b"Acme Web" in response.content, name


def test_outsiders_get_404_for_everything_of_a_project(world, note, outsider_client):
    for name, url in project_pages(world, note).items():
        assert outsider_client.get(url).status_code == 404, name
    assert outsider_client.get(reverse("dashboard:audit") + "?project=acme-web").status_code == 404


def test_unknown_ids_are_404(world, manager_client):
    for url in [
        reverse("dashboard:project", args=["nope"]),
        reverse("dashboard:note", args=[SLUG, "mem_missing"]),
        reverse("dashboard:agent", args=[SLUG, "agt_missing"]),
        reverse("dashboard:run", args=[SLUG, "run_missing"]),
    ]:
        assert manager_client.get(url).status_code == 404, url


def test_a_note_of_another_project_is_404_under_this_project(world, make_user, manager_client):
    from tests.conftest import build_world

    other = build_world(make_user, slug="other-web")
    services.membership_set(actor=None, project=other.project, user=world.manager, role="manager")
    foreign = write_note(other, "Belongs to the other project")
    assert manager_client.get(reverse("dashboard:note", args=[SLUG, foreign.pk])).status_code == 404
    assert (
        manager_client.get(reverse("dashboard:note", args=["other-web", foreign.pk])).status_code
        == 200
    )
    foreign_agent = reverse("dashboard:agent", args=[SLUG, other.agent.pk])
    assert manager_client.get(foreign_agent).status_code == 404


def test_anonymous_visitors_are_sent_to_login(world, note, client):
    for url in [reverse("dashboard:projects"), *project_pages(world, note).values()]:
        response = client.get(url)
        assert response.status_code == 302
        assert response.url.startswith("/login/?next=")
    htmx = client.post(reverse("dashboard:note-veto", args=[SLUG, note.pk]), **HTMX)
    assert htmx.status_code == 200 and htmx["HX-Redirect"].startswith("/login/")


# --- Projects -------------------------------------------------------------------------------


def test_projects_lists_only_the_persons_projects(world, make_user, manager_client):
    from tests.conftest import build_world

    build_world(make_user, slug="secret-web", enabled=False)
    write_notes(world, 3)
    response = manager_client.get(reverse("dashboard:projects"))
    html = response.content.decode()
    assert "acme-web" in html and "secret-web" not in html
    assert "3 / 2000" in html
    assert "Memory on" in html


def test_a_project_card_links_every_page_a_manager_starts_from(world, manager_client):
    """The card's links, in the order of the project's tabs: the overview and Connect too."""
    html = manager_client.get(reverse("dashboard:projects")).content.decode()
    footer = html[html.index('<footer class="card-links">') :]
    footer = footer[: footer.index("</footer>")]
    names = ["overview", "project", "review", "recoveries", "agents", "connect", "runs", "members"]
    hrefs = [reverse(f"dashboard:{name}", args=[world.project.slug]) for name in names]
    assert re.findall(r'href="([^"]+)"', footer) == hrefs


def test_every_field_s_help_is_the_one_its_widget_names(world, make_user, manager_client):
    """The stacked forms (dashboard/form_field.html): each aria-describedby (Django gives a
    field with help text `<id>_helptext`) names an element of the page, so a screen reader reads
    the help with the field."""
    admin = client_for(make_user("root", superuser=True))
    pages = [
        (manager_client, reverse("dashboard:connect", args=[world.project.slug])),
        (manager_client, reverse("dashboard:tokens")),
        (manager_client, reverse("dashboard:agent", args=[world.project.slug, world.agent.pk])),
        (admin, reverse("dashboard:import")),
    ]
    for client, url in pages:
        html = client.get(url).content.decode()
        ids = set(re.findall(r'\sid="([^"]+)"', html))
        refs = re.findall(r'aria-describedby="([^"]+)"', html)
        named = [i for ref in refs for i in ref.split()]
        assert named and set(named) <= ids, (url, set(named) - ids)


def test_projects_empty_state(make_user, client):
    client.force_login(make_user("loner"))
    assert b"not a member of any project" in client.get(reverse("dashboard:projects")).content


def test_projects_page_is_one_query_per_page_not_per_project(
    make_user, client, django_assert_max_num_queries
):
    from tests.conftest import build_world

    user = make_user("many")
    for i in range(6):
        w = build_world(make_user, slug=f"proj-{i}")
        services.membership_set(actor=None, project=w.project, user=user, role="member")
    client.force_login(user)
    with django_assert_max_num_queries(4):
        response = client.get(reverse("dashboard:projects"))
    assert response.content.count(b"project-card") >= 6


# --- Project memory -------------------------------------------------------------------------


def test_the_cap_counter_says_forgotten_notes_count_until_a_reset(world, manager_client):
    note = write_note(world, "Deploys need the VPN")
    html = manager_client.get(reverse("dashboard:project", args=[SLUG])).content.decode()
    assert "0 forgotten and 0 archived count too; only a reset frees space" in html
    services.note_forget(actor=world.as_manager, note_id=note.id)
    html = manager_client.get(reverse("dashboard:project", args=[SLUG])).content.decode()
    assert "1 forgotten and 0 archived count too" in html


def test_settings_hold_the_memory_switch_and_the_header_links_there(world, manager_client):
    write_note(world, "Deploys need the VPN")
    html = manager_client.get(reverse("dashboard:settings", args=[SLUG])).content.decode()
    card = html[html.index('<section id="memory"') :]
    card = card[: card.index("</section>")]
    wanted = ["● On", "Disable memory", "Changes so far", "Switch-offs and resets", "Reset memory"]
    for text in wanted:
        assert text in card, text
    notes = manager_client.get(reverse("dashboard:project", args=[SLUG])).content.decode()
    assert "Disable memory" not in notes and "Reset memory" not in notes
    assert f'<a class="counter switch" href="/p/{SLUG}/settings/#memory"' in notes
    assert f'<a class="counter" href="/p/{SLUG}/review/">' in notes


def test_project_memory_shows_the_counters_and_the_columns(world, manager_client):
    note = write_note(world, "Deploys need the VPN", tags=["deploy"], step="plan")
    html = manager_client.get(reverse("dashboard:project", args=[SLUG])).content.decode()
    for text in ["● On", "Awaiting review", "Learned 1", "Active 1"]:
        assert text in html
    for name in [
        "q",
        "trust",
        "status",
        "kind",
        "target",
        "scope",
        "application",
        "agent",
        "run",
        "tag",
        "created_from",
        "created_to",
        "expired",
        "evidence_stale",
    ]:
        assert f'name="{name}"' in html, name
    assert '<option value="storefront">' in html and f'<option value="{world.agent.pk}">' in html
    row = html[html.index(f'id="note-{note.pk}"') :]
    row = row[: row.index("</tr>")]
    for text in [
        "fact",
        "Deploys need the VPN",
        "Learned",
        "Active",
        "project",
        "runtime",
        "Runtime helper",
        "plan",
        "running",
        "PIN-42",
        "deploy",
        "Approve",
        "Veto",
    ]:
        assert text in row, text


def test_members_do_not_see_manager_controls(world, member_client):
    write_note(world, "A learned note")
    settings = member_client.get(reverse("dashboard:settings", args=[SLUG])).content.decode()
    assert "Only a project manager can switch or reset memory." in settings
    assert "Disable memory" not in settings and "Reset memory" not in settings
    html = member_client.get(reverse("dashboard:project", args=[SLUG])).content.decode()
    assert ">Approve<" not in html and ">Reject<" not in html
    assert ">Veto<" in html and 'data-panel="more">More<' in html


def test_filters_narrow_the_table(world, manager_client):
    a = write_note(world, "Alpha about caching", tags=["perf"])
    b = write_note(world, "Beta about billing", kind="decision")
    c = save_fact(world, "Gamma the agent keeps")
    services.note_approve(actor=world.as_manager, note_id=b.pk)
    services.note_veto(actor=world.as_member, note_id=a.pk)
    url = reverse("dashboard:project", args=[SLUG])

    def ids(query):
        html = manager_client.get(url + query).content.decode()
        return {n for n in (a.pk, b.pk, c.pk) if f'id="note-{n}"' in html}

    assert ids("") == {a.pk, b.pk, c.pk}
    assert ids("?q=billing") == {b.pk}
    assert ids("?trust=reviewed") == {b.pk}
    assert ids("?status=archived") == {a.pk}
    assert ids("?kind=decision") == {b.pk}
    assert ids("?scope=agent") == {c.pk}
    assert ids("?tag=perf") == {a.pk}
    assert ids(f"?agent={world.agent.pk}") == {a.pk, b.pk, c.pk}
    assert ids(f"?agent={world.agent2.pk}") == set()
    assert ids(f"?run={world.run.pk}") == {a.pk, b.pk}
    assert ids("?expired=true") == set()
    assert ids("?expired=false") == {a.pk, b.pk, c.pk}
    assert ids("?evidence_stale=true") == set()
    assert ids("?created_from=2000-01-01&created_to=2999-01-01") == {a.pk, b.pk, c.pk}
    assert ids("?created_to=2000-01-01") == set()
    assert ids("?target=daily") == set()
    assert ids("?application=storefront") == set()


def test_empty_states(world, manager_client):
    url = reverse("dashboard:project", args=[SLUG])
    assert b"No notes yet" in manager_client.get(url).content
    write_note(world, "Something")
    assert b"No notes match these filters" in manager_client.get(url + "?q=zzz").content


def test_sorting_and_pagination(world, manager_client):
    notes = write_notes(world, 30)
    url = reverse("dashboard:project", args=[SLUG])
    html = manager_client.get(url + "?per_page=25").content.decode()
    assert html.count('class="note-row') == 25
    assert "1–25 of 30" in html
    assert 'rel="next"' in html
    page2 = manager_client.get(url + "?per_page=25&page=2").content.decode()
    assert page2.count('class="note-row') == 5
    oldest_first = manager_client.get(url + "?sort=created").content.decode()
    assert oldest_first.index(notes[0].pk) < oldest_first.index(notes[1].pk)
    newest_first = manager_client.get(url).content.decode()
    assert newest_first.index(notes[1].pk) < newest_first.index(notes[0].pk)
    # A page past the end shows the last page; an absurd per_page falls back to the default.
    assert manager_client.get(url + "?page=99").status_code == 200
    assert (
        manager_client.get(url + "?per_page=100000").content.decode().count('class="note-row') == 30
    )


# --- Note -----------------------------------------------------------------------------------


def test_note_page_shows_text_provenance_chain_and_history(world, manager_client):
    old = save_fact(world, "The cache TTL is 5 minutes")
    new = services.note_edit(
        actor=world.as_member, note_id=old.pk, content="The cache TTL is 10 minutes"
    ).note
    html = manager_client.get(reverse("dashboard:note", args=[SLUG, old.pk])).content.decode()
    assert "The cache TTL is 5 minutes" in html
    assert new.pk in html and "newer" in html
    assert "note.save" in html and "note.edit" not in html  # the edit event belongs to the new note
    new_html = manager_client.get(reverse("dashboard:note", args=[SLUG, new.pk])).content.decode()
    assert old.pk in new_html and "older" in new_html and "note.edit" in new_html
    assert "acme-web-member" in new_html  # the creating person


def test_note_page_provenance_of_an_agent_note(world, manager_client):
    note = write_note(world, "Checkout uses the v2 pricing API", step="research")
    html = manager_client.get(reverse("dashboard:note", args=[SLUG, note.pk])).content.decode()
    for text in [
        world.agent.pk,
        "Runtime helper",
        "runtime",
        world.run.pk,
        "research",
        "PIN-42",
        "running",
        "No evidence cited",
        "Not part of a supersede chain",
    ]:
        assert text in html, text


# --- Review queue ---------------------------------------------------------------------------


def test_review_queue_sections_and_shortcuts(world, manager_client):
    from datetime import timedelta

    from django.utils import timezone

    learned = write_notes(world, 3, prefix="Learned")
    expired = save_fact(world, "About to expire", expires_at=timezone.now() + timedelta(seconds=1))
    services.note_approve(actor=world.as_manager, note_id=expired.pk)
    Note.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(days=1))
    old = write_note(world, "Nobody recalls this one")
    services.note_approve(actor=world.as_manager, note_id=old.pk)
    Note.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=45))
    day_log_yesterday(world, ["looked at the flaky test", "fact: the staging DB is read-only"])

    html = manager_client.get(reverse("dashboard:review", args=[SLUG])).content.decode()
    assert "data-shortcuts" in html and "<kbd>j</kbd>" in html and "<kbd>v</kbd>" in html
    learned_section = html[html.index('id="queue-learned"') : html.index('id="queue-expired"')]
    assert learned_section.index(learned[0].pk) < learned_section.index(learned[2].pk)
    expired_section = html[html.index('id="queue-expired"') : html.index('id="queue-not_recalled"')]
    assert expired.pk in expired_section
    unrecalled = html[html.index('id="queue-not_recalled"') : html.index('id="queue-stale"')]
    assert old.pk in unrecalled
    day = html[html.index('id="queue-day-lines"') :]
    assert "looked at the flaky test" in day and "Lift into a fact" in day
    assert 'aria-keyshortcuts="a"' in html and 'aria-keyshortcuts="v"' in html


def test_a_row_redrawn_in_its_review_section_keeps_sending_the_section(world, manager_client):
    """Approving a note in "Not recalled in 30 days" leaves it there: the redrawn row's
    buttons and "More" still carry the section, so its next action redraws the section too."""
    from datetime import timedelta

    from django.utils import timezone

    old = write_note(world, "Nobody recalls this one")
    Note.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=45))
    answer = manager_client.post(
        reverse("dashboard:note-approve", args=[SLUG, old.pk]),
        {"section": "not_recalled"},
        HTTP_HX_REQUEST="true",
    )
    html = answer.content.decode()
    assert f'id="note-{old.pk}"' in html and 'id="queue-not_recalled-count"' in html
    row = html[html.index(f'id="note-{old.pk}"') : html.index("</tr>")]
    assert 'name="section" value="not_recalled"' in row and "Approve" not in row
    assert 'data-section="not_recalled"' in row


def test_review_queue_empty_states(world, member_client):
    html = member_client.get(reverse("dashboard:review", args=[SLUG])).content.decode()
    assert "Nothing awaits review" in html
    assert "No day-log lines from yesterday" in html
    assert "<kbd>a</kbd>" not in html  # members cannot approve: the legend says so


# --- Recoveries, agents, runs, audit --------------------------------------------------------


def test_recoveries_lists_forgotten_notes_with_who_and_when(world, manager_client, member_client):
    note = write_note(world, "Forget me")
    recovery = services.note_forget(actor=world.as_manager, note_id=note.pk)
    url = reverse("dashboard:recoveries", args=[SLUG])
    html = manager_client.get(url).content.decode()
    assert recovery.pk in html and "acme-web-manager" in html and "Restore" in html
    member_html = member_client.get(url).content.decode()
    assert recovery.pk in member_html and ">Restore<" not in member_html
    services.note_restore(actor=world.as_manager, recovery_id=recovery.pk)
    assert b"Nothing is forgotten" in manager_client.get(url).content


def test_recoveries_name_the_agent_that_forgot_a_note(world, manager_client):
    note = write_note(world, "Forgotten by its agent")
    services.note_forget(actor=world.as_agent, note_id=note.pk)
    url = reverse("dashboard:recoveries", args=[SLUG])
    html = manager_client.get(url).content.decode()
    agent_url = reverse("dashboard:agent", args=[SLUG, world.agent.pk])
    assert f'<a href="{agent_url}">Runtime helper</a> <small class="muted">agent</small>' in html
    assert f">{world.agent.pk}<" not in html  # no raw id where the name is known
    Agent.objects.filter(pk=world.agent.pk).delete()
    html = manager_client.get(url).content.decode()
    assert f"…{world.agent.pk[-8:]}" in html and "agent, deleted" in html


def test_agents_and_agent_page(world, manager_client):
    save_fact(world, "The agent's own fact")
    write_note(world, "Written by the agent")
    services.day_append(actor=world.as_agent, line="started the audit")
    html = manager_client.get(reverse("dashboard:agents", args=[SLUG])).content.decode()
    assert "Runtime helper" in html and "Code reviewer" in html and "not eligible" in html
    page = manager_client.get(
        reverse("dashboard:agent", args=[SLUG, world.agent.pk])
    ).content.decode()
    assert "The agent&#x27;s own fact" in page and "Written by the agent" in page
    assert "started the audit" in page and "PIN-42" in page
    assert 'id="recall-preview"' in page
    assert "Save fact" in page
    other = manager_client.get(
        reverse("dashboard:agent", args=[SLUG, world.agent2.pk])
    ).content.decode()
    assert "Written by the agent" not in other and "No day log yet" in other


def test_runs_and_run_page(world, manager_client, member_client):
    note = write_note(world, "Run note")
    services.tool_call_record(run=world.run, tool="write", outcome="ok")
    services.tool_call_record(run=world.run, tool="write", outcome="secret_in_memory")
    services.scratchpad_add(actor=world.as_agent, text="check the cron table")
    html = manager_client.get(reverse("dashboard:runs", args=[SLUG])).content.decode()
    assert world.run.pk in html and "PIN-42" in html and "running" in html
    page = manager_client.get(reverse("dashboard:run", args=[SLUG, world.run.pk])).content.decode()
    assert "secret_in_memory" in page and "check the cron table" in page and note.pk in page
    assert "Delete run" in page
    member_page = member_client.get(reverse("dashboard:run", args=[SLUG, world.run.pk])).content
    assert b"Delete run" not in member_page


def test_the_runs_tab_filters_and_an_agents_page_lists_its_runs(world, member_client):
    services.run_update(actor=None, run=world.run2, status="failed")
    runs = reverse("dashboard:runs", args=[SLUG])

    def listed(**query) -> set[str]:
        html = member_client.get(runs, query).content.decode()
        return set(re.findall(r'href="/p/acme-web/runs/(run_\w+)/"', html))

    assert listed(agent=world.agent2.pk) == {world.run2.pk}
    assert listed(status="failed") == {world.run2.pk}
    assert listed(task_key="pin-42") == {world.run.pk}
    assert world.run.pk in listed(started_from=timezone.localdate().isoformat())
    assert listed(started_to="2020-01-01") == set()
    none = member_client.get(runs, {"task_key": "X"}).content.decode()
    assert "No run matches these filters" in none
    bad = member_client.get(runs, {"status": "lost"}).content.decode()
    assert "Select a valid choice" in bad
    agent = member_client.get(reverse("dashboard:agent", args=[SLUG, world.agent2.pk]))
    html = agent.content.decode()
    assert f'href="/p/{SLUG}/runs/?agent={world.agent2.pk}">All runs of Design agent</a>' in html
    assert f'href="/p/{SLUG}/runs/{world.run2.pk}/"' in html and world.run.pk not in html


def test_run_page_shows_the_step_and_that_a_finished_runs_token_is_revoked(
    world, manager_client
):
    services.token_create(actor=None, run=world.run)
    url = reverse("dashboard:run", args=[SLUG, world.run.pk])
    services.run_update(actor=None, run=world.run, step="implement")
    page = manager_client.get(url).content.decode()
    assert "Token live (1)" in page and "implement" in page and "Token revoked" not in page
    services.run_update(actor=world.as_manager, run=world.run, status="succeeded")
    page = manager_client.get(url).content.decode()
    assert "Token revoked" in page and "the run has finished" in page


def test_run_page_shows_the_task(world, manager_client):
    run = services.run_create(
        actor=None,
        agent=world.agent,
        task_title="PIN-901: <b>staging</b> deploy hangs",
        task_description="helm upgrade times out.\nSince Monday.",
    )
    page = manager_client.get(reverse("dashboard:run", args=[SLUG, run.pk])).content.decode()
    assert 'id="run-task"' in page
    assert "PIN-901: &lt;b&gt;staging&lt;/b&gt; deploy hangs" in page
    assert "helm upgrade times out.<br>Since Monday." in page
    plain = manager_client.get(reverse("dashboard:run", args=[SLUG, world.run.pk]))
    assert 'id="run-task"' not in plain.content.decode()


def test_audit_log_filters_and_pages_without_counting(
    world, make_user, manager_client, django_assert_max_num_queries
):
    from tests.conftest import build_world

    other = build_world(make_user, slug="hidden-web")
    write_note(other, "Not for acme members")
    notes = write_notes(world, 3)
    services.note_veto(actor=world.as_member, note_id=notes[0].pk)
    url = reverse("dashboard:audit")
    html = manager_client.get(url).content.decode()
    assert "note.veto" in html and "acme-web-member" in html
    assert "hidden-web" not in html
    vetoes = manager_client.get(url + "?action=note.veto").content.decode()
    assert vetoes.count("<code>note.veto</code>") == 1 and "<code>note.write</code>" not in vetoes
    by_actor = manager_client.get(url + "?actor=acme-web-member").content.decode()
    assert "<code>note.veto</code>" in by_actor and "<code>note.write</code>" not in by_actor
    assert b"No audit events match" in manager_client.get(url + "?date_to=2000-01-01").content
    assert manager_client.get(url + "?project=hidden-web").status_code == 404
    with django_assert_max_num_queries(6) as captured:
        manager_client.get(url + "?project=acme-web")
    assert not any("COUNT(" in q["sql"].upper() for q in captured.captured_queries)


def test_audit_log_pages(world, manager_client):
    write_notes(world, 60)
    url = reverse("dashboard:audit")
    first = manager_client.get(url).content.decode()
    assert first.count("<code>note.write</code>") == 50 and "Older" in first
    older = re.search(r'href="\?before=([0-9.]+)" rel="next"', first).group(1)
    second = manager_client.get(url + f"?before={older}").content.decode()
    assert "Newer" in second and "Older" not in second
    assert second.count("<code>note.write</code>") == 10
    newer = re.search(r'href="\?after=([0-9.]+)" rel="prev"', second).group(1)
    again = manager_client.get(url + f"?after={newer}").content.decode()
    assert again.count("<code>note.write</code>") == 50 and "Newer" not in again
    # a cursor that does not parse is the first page, never a 500
    assert manager_client.get(url + "?before=x.y&after=").status_code == 200
    assert AuditEvent.objects.count() > 60


def test_projects_are_listed_a_page_at_a_time_without_counting(
    make_user, client, settings, monkeypatch, django_assert_max_num_queries
):
    """A superuser of a large deployment sees every project: the list is paged (one row more
    than a page is read to know whether another follows), and a page past the end says so."""
    from memory_portal.dashboard.views import pages
    from tests.conftest import build_world

    monkeypatch.setattr(pages, "PROJECTS_PER_PAGE", 2)
    client.force_login(make_user("root", superuser=True))
    for i in range(5):
        build_world(make_user, slug=f"paged-{i}")
    url = reverse("dashboard:projects")
    with django_assert_max_num_queries(4) as captured:
        first = client.get(url).content.decode()
    assert not any("COUNT(" in q["sql"].upper() for q in captured.captured_queries)
    assert first.count("project-card") == 2 and "paged-0" in first and "paged-2" not in first
    assert 'rel="next"' in first and 'rel="prev"' not in first
    last = client.get(url, {"page": 3}).content.decode()
    assert last.count("project-card") == 1 and "paged-4" in last
    assert 'rel="prev"' in last and 'rel="next"' not in last
    beyond = client.get(url, {"page": 9}).content.decode()
    assert "No more projects" in beyond and "project-card" not in beyond
    assert client.get(url, {"page": "x"}).status_code == 200
    huge = client.get(url, {"page": "9" * 30})  # past any OFFSET the database takes: no 500
    assert huge.status_code == 200 and "No more projects" in huge.content.decode()


def test_each_review_section_counts_what_its_see_all_link_lists(world, manager_client):
    """A section and its "See all" link are one filter: following the link lists exactly the
    section's count, day logs, expired, rejected and unrecalled notes included in the set-up."""
    from datetime import timedelta
    from urllib.parse import urlencode

    from django.utils import timezone

    from memory_portal.memory import selectors

    write_notes(world, 3, prefix="Learned")
    expired = save_fact(world, "About to expire", expires_at=timezone.now() + timedelta(seconds=1))
    Note.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(days=1))
    services.day_append(actor=world.as_agent, line="today's line: a learned, live day log")
    old = write_note(world, "Nobody recalls this one")
    rejected = write_note(world, "Rejected and old")
    services.note_approve(actor=world.as_manager, note_id=old.pk)
    services.note_reject(actor=world.as_manager, note_id=rejected.pk)
    long_ago = timezone.now() - timedelta(days=45)
    Note.objects.filter(pk__in=[old.pk, rejected.pk]).update(created_at=long_ago)
    day_log_yesterday(world, ["an old line"])
    queue = selectors.review_queue(actor=world.as_manager, project=world.project)
    # Learned: the three, and the expired one (awaiting review still); not the day logs. The
    # stored counter the header and the projects list show is the same number.
    assert queue.totals["learned"] == 4 and queue.totals["not_recalled"] == 1
    assert MemorySetting.objects.get(project=world.project).notes_awaiting == 4
    for section in selectors.REVIEW_SECTIONS:
        url = reverse("dashboard:project", args=[SLUG]) + "?" + urlencode(section.filters)
        response = manager_client.get(url)
        assert response.status_code == 200
        listed = response.context["table"].paginator.count
        assert listed == queue.totals[section.key], section.key


def test_a_note_page_steps_through_the_list_it_was_opened_from(world, manager_client):
    """`from` (added by portal.js to a note's link) is the list's path and query: the page
    shows the note's place in that list, in its order and with its filters, links to the
    previous and next notes (keeping the list), and a decision goes on to the next note."""
    from urllib.parse import quote

    notes = write_notes(world, 3, prefix="Stepped")  # newest first in the table: 2, 1, 0
    services.note_approve(actor=world.as_manager, note_id=notes[1].pk)

    def page(note, origin):
        url = reverse("dashboard:note", args=[SLUG, note.pk]) + "?from=" + quote(origin, safe="")
        response = manager_client.get(url)
        assert response.status_code == 200, origin  # a bad `from` never hides the note
        return response.content.decode()

    def note_link(note, origin):
        keep = quote(origin, safe="")
        return f"/p/{SLUG}/notes/{note.pk}/?from={keep}"

    learned = f"/p/{SLUG}/?trust=learned"
    html = page(notes[2], learned)
    assert "1 of 2" in html and 'rel="prev"' not in html
    assert f'href="{note_link(notes[0], learned)}" class="btn" rel="next"' in html
    # A decision goes on to the next note of the list.
    assert f'name="next" value="{note_link(notes[0], learned)}"' in html
    html = page(notes[0], learned)
    assert "2 of 2" in html and f'href="{note_link(notes[2], learned)}"' in html
    oldest_first = f"/p/{SLUG}/?sort=created"
    assert "1 of 3" in page(notes[0], oldest_first)
    queue = f"/p/{SLUG}/review/"
    html = page(notes[0], queue)
    assert "Review queue · Learned notes, oldest first" in html and "1 of 2" in html
    agent = f"/p/{SLUG}/agents/{world.agent.pk}/"
    assert "Notes of Runtime helper" in page(notes[0], agent)
    # No list, a list it is not in, or a path that is not this project's lists: no steps.
    for origin in ["", f"/p/{SLUG}/?trust=rejected", "/p/other/", "https://evil.example/p/acme-web/",
                   f"/p/{SLUG}/runs/", "//evil.example/p/acme-web/",
                   f"/p/{SLUG}/agents/agt_nobody/"]:  # fmt: skip
        assert 'class="note-steps"' not in page(notes[0], origin), origin
