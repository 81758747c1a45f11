"""The run page's revert: the preview page (grouped, reviewed notes with checkboxes), the
POST that applies it and redirects, the typed confirmation, the banner and Undo revert —
all without JavaScript; members refused, outsiders 404."""

from __future__ import annotations

from django.contrib.messages import get_messages
from django.urls import reverse

from memory_portal.memory import services
from memory_portal.memory.models import AuditEvent, Note, RunRevert, Status

from .conftest import save_fact, write_note

SLUG = "acme-web"


def url(name, world):
    return reverse(f"dashboard:{name}", args=[SLUG, world.run.pk])


def test_preview_apply_banner_and_undo(world, manager_client):
    shared = write_note(world, "The staging database is rebuilt nightly")
    reviewed = write_note(world, "Checkout calls the tax service")
    services.note_approve(actor=world.as_manager, note_id=reviewed.pk)
    fact = services.fact_save(actor=world.as_agent, text="Deploys go out on Tuesdays").note
    unrelated = save_fact(world, "The design system lives in packages/ui")

    page = manager_client.get(url("run", world)).content.decode()
    assert "Revert this run…" in page and "run-reverted" not in page

    preview = manager_client.get(url("run-revert", world))
    html = preview.content.decode()
    assert preview.status_code == 200
    assert "Shared notes to forget (1)" in html and shared.pk in html
    assert "Agent facts to veto (1)" in html and fact.pk in html
    assert f'name="include_reviewed" value="{reviewed.pk}"' in html
    assert 'name="confirm"' not in html  # few changes: no typed confirmation
    assert Note.objects.filter(status=Status.ACTIVE).count() == 4  # nothing changed

    response = manager_client.post(url("run-revert", world), {})
    assert response.status_code == 302 and response["Location"] == url("run", world)
    assert Note.objects.get(pk=shared.pk).status == Status.FORGOTTEN
    assert Note.objects.get(pk=fact.pk).is_vetoed
    assert Note.objects.get(pk=reviewed.pk).status == Status.ACTIVE  # not ticked
    assert Note.objects.get(pk=unrelated.pk).status == Status.ACTIVE
    assert "Reverted run" in str(list(get_messages(response.wsgi_request))[0])

    page = manager_client.get(url("run", world)).content.decode()
    assert 'id="run-reverted"' in page and "Undo revert" in page
    note_page = manager_client.get(reverse("dashboard:note", args=[SLUG, shared.pk]))
    assert "reverted with run" in note_page.content.decode()

    response = manager_client.post(url("run-revert-undo", world))
    assert response.status_code == 302
    assert Note.objects.get(pk=shared.pk).status == Status.ACTIVE
    assert Note.objects.get(pk=fact.pk).status == Status.ACTIVE
    assert "Undo revert" not in manager_client.get(url("run", world)).content.decode()
    assert AuditEvent.objects.filter(action="run.revert_undo").count() == 1


def test_ticked_reviewed_note_goes_and_typed_confirmation_above_threshold(world, manager_client):
    reviewed = write_note(world, "Checkout calls the tax service")
    services.note_approve(actor=world.as_manager, note_id=reviewed.pk)
    for i in range(20):
        write_note(world, f"Service {i} answers on port {8000 + i}")
    assert 'name="confirm"' in manager_client.get(url("run-revert", world)).content.decode()
    response = manager_client.post(url("run-revert", world), {"include_reviewed": reviewed.pk})
    assert response.status_code == 302 and response["Location"] == url("run-revert", world)
    assert not RunRevert.objects.exists()
    response = manager_client.post(
        url("run-revert", world), {"include_reviewed": reviewed.pk, "confirm": world.run.pk}
    )
    assert response["Location"] == url("run", world)
    assert Note.objects.get(pk=reviewed.pk).status == Status.FORGOTTEN
    assert not Note.objects.filter(status=Status.ACTIVE).exists()


def test_members_are_refused_and_outsiders_get_404(world, member_client, outsider_client):
    note = write_note(world, "The staging database is rebuilt nightly")
    page = member_client.get(url("run", world)).content.decode()
    assert "Revert this run…" not in page
    assert member_client.get(url("run-revert", world)).status_code == 403
    assert member_client.post(url("run-revert", world), {}).status_code == 302
    assert Note.objects.get(pk=note.pk).status == Status.ACTIVE
    assert outsider_client.get(url("run-revert", world)).status_code == 404
    assert outsider_client.post(url("run-revert", world), {}).status_code == 404
    assert outsider_client.post(url("run-revert-undo", world)).status_code == 404
    assert not RunRevert.objects.exists()
