"""The dashboard's import (administrators): a dry run that lists problems by line and writes
nothing, then the import — its phases streamed for the progress bar, or a plain page."""

from __future__ import annotations

import json

from django.core.files.uploadedfile import SimpleUploadedFile

from memory_portal.memory.models import Note, Project
from memory_portal.memory.portability import project_export

from .conftest import client_for, write_note

PAGE, CHECK, RUN = "/import/", "/import/check/", "/import/run/"
STREAM = {"HTTP_X_IMPORT_PROGRESS": "ndjson"}


def export_file(world, name: str = "acme-web.jsonl") -> SimpleUploadedFile:
    body = "".join(project_export(actor=None, project=world.project)).encode()
    return SimpleUploadedFile(name, body, content_type="application/x-ndjson")


def admin_client(make_user):
    return client_for(make_user("root", superuser=True))


def test_only_administrators_import(world, manager_client, client):
    page = manager_client.get(PAGE)
    assert page.status_code == 403
    assert "Only an administrator can import a project." in page.content.decode()
    assert 'href="/import/"' not in manager_client.get("/").content.decode()
    response = manager_client.post(RUN, {"file": export_file(world), "project": "acme-copy"})
    assert response.status_code == 403 and not Project.objects.filter(slug="acme-copy").exists()
    assert client.get(PAGE).status_code == 302  # to the login page


def test_the_dry_run_says_what_would_be_imported_and_writes_nothing(world, make_user):
    write_note(world, "A note to carry over")
    admin = admin_client(make_user)
    page = admin.get(PAGE + "?project=acme-copy")
    assert page.status_code == 200 and 'value="acme-copy"' in page.content.decode()
    assert 'href="/import/"' in admin.get("/").content.decode()
    odd = admin.get(PAGE + "?project=no%20slug%3Cb%3E").content.decode()
    assert 'name="project"' in odd and "no slug" not in odd and "\x00" not in odd

    response = admin.post(
        CHECK, {"file": export_file(world), "project": "acme-copy"}, HTTP_HX_REQUEST="true"
    )
    body = response.content.decode()
    assert response.status_code == 200 and "The file is fine" in body
    assert "1 note, " in body and "Into a new project <code>acme-copy</code>" in body
    assert "with new ids (a copy)" in body and "Import now" in body
    assert "<html" not in body  # the report alone, for the page's script
    # Who the import would make members of the new project, and with what role.
    assert "Members of the new project" in body
    assert f"<code>{world.manager.username}</code></td><td data-label=\"Role\">manager" in body
    assert not Project.objects.filter(slug="acme-copy").exists()

    same = admin.post(CHECK, {"file": export_file(world)}).content.decode()  # no JavaScript
    assert "<html" in same and "Into the existing project <code>acme-web</code>" in same
    assert "ids kept" in same and "Import now" not in same
    assert "an import never changes an existing project's members" in same


def test_a_bad_file_is_refused_line_by_line(world, make_user):
    admin = admin_client(make_user)
    lines = "".join(project_export(actor=None, project=world.project)).splitlines()
    lines[1] = '{"type": "project", "slug": 7}'
    lines.insert(2, "not json")
    bad = SimpleUploadedFile("bad.jsonl", ("\n".join(lines) + "\n").encode())
    response = admin.post(CHECK, {"file": bad, "project": "acme-copy"})
    body = response.content.decode()
    assert response.status_code == 400 and "The file was refused" in body
    assert "nothing was imported" in body
    assert '<td data-label="Line" class="mono">2</td>' in body
    assert '<td data-label="Line" class="mono">3</td>' in body
    binary = SimpleUploadedFile("x.jsonl", b'{"type": "header"}\n\xff\xfe\n')
    body = admin.post(RUN, {"file": binary}).content.decode()
    assert '<td data-label="Line" class="mono">2</td>' in body and "not UTF-8 text" in body
    empty = admin.post(CHECK, {"project": "bad slug!"})
    assert empty.status_code == 400 and "A project id: letters" in empty.content.decode()
    assert not Project.objects.filter(slug="acme-copy").exists()


def test_the_import_streams_its_phases_then_the_report(world, make_user):
    write_note(world, "Carried over with a progress bar")
    admin = admin_client(make_user)
    form = {"file": export_file(world), "project": "acme-copy", "grant_members": "on"}
    response = admin.post(RUN, form, **STREAM)
    assert response.status_code == 200 and response["Content-Type"] == "application/x-ndjson"
    events = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    phases = [e["phase"] for e in events]
    assert phases[0] == "checked" and phases[-2:] == ["writing", "done"]
    assert set(phases[1:-2]) <= {"vectors"}
    assert events[0]["lines"] > 5
    assert "Created project" in events[-1]["html"] and "acme-copy" in events[-1]["html"]
    assert "Members added" in events[-1]["html"]
    copy = Project.objects.get(slug="acme-copy")
    assert Note.objects.filter(project=copy, content="Carried over with a progress bar").exists()

    again = admin.post(RUN, {"file": export_file(world), "project": "acme-copy"}, **STREAM)
    last = json.loads(b"".join(again.streaming_content).splitlines()[-1])
    assert last["phase"] == "done" and "nothing: it was all there" in last["html"]


def test_a_refused_file_is_answered_before_any_stream(world, make_user):
    admin = admin_client(make_user)
    bad = SimpleUploadedFile("bad.jsonl", b"not json\n")
    response = admin.post(RUN, {"file": bad}, **STREAM)
    assert response.status_code == 400 and response["Content-Type"].startswith("text/html")
    assert "The file was refused" in response.content.decode()


def test_the_plain_import_answers_with_the_page(world, make_user):
    admin = admin_client(make_user)
    unconfirmed = admin.post(RUN, {"file": export_file(world), "project": "acme-copy"})
    text = unconfirmed.content.decode()
    assert unconfirmed.status_code == 400 and "Nothing was imported" in text
    assert f"{world.manager.username} (manager)" in text
    assert not Project.objects.filter(slug="acme-copy").exists()
    form = {"file": export_file(world), "project": "acme-copy", "grant_members": "on"}
    response = admin.post(RUN, form)
    body = response.content.decode()
    assert response.status_code == 200 and "<html" in body and "Created project" in body
    assert 'href="/p/acme-copy/"' in body


def test_the_page_and_the_dry_run_cost_few_queries(world, make_user, django_assert_max_num_queries):
    admin = admin_client(make_user)
    with django_assert_max_num_queries(4):
        admin.get(PAGE)
    upload = export_file(world)
    with django_assert_max_num_queries(8):
        admin.post(CHECK, {"file": upload, "project": "acme-copy"})


def test_a_file_past_the_import_limit_is_refused_before_reading(world, make_user, settings):
    settings.MEMORY_PORTAL_IMPORT_MAX_BYTES = 1000
    admin = admin_client(make_user)
    big = SimpleUploadedFile("big.jsonl", b"x" * 2000)
    response = admin.post(CHECK, {"file": big})
    assert response.status_code == 413
