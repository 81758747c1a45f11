"""The import page in Chromium at 1280 and 390 px: choose an export, check it (problems by
line for a bad one), then import it with the progress bar; axe-clean."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from memory_portal.memory.models import Note, Project
from memory_portal.memory.portability import project_export
from tests.dashboard.conftest import write_note

from .conftest import axe_violations

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_an_administrator_checks_then_imports_a_file(open_page, world, make_user, tmp_path, width):
    write_note(world, "Imported through the browser")
    good = tmp_path / "acme-web.jsonl"
    good.write_text("".join(project_export(actor=None, project=world.project)))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good.read_text().replace('"type":"project"', '"type":"projekt"', 1))
    view = open_page(make_user("root", superuser=True), width)
    view.goto("/import/")
    expect(view.page.get_by_role("heading", name="Import a project")).to_be_visible()
    assert not axe_violations(view.page)
    files = view.page.get_by_label("Export file (.jsonl)")

    files.set_input_files(str(bad))
    view.page.get_by_role("button", name="Check the file").click()
    expect(view.page.get_by_role("heading", name="The file was refused")).to_be_visible()
    lines = view.page.locator('.import-problems td[data-label="Line"]')
    expect(lines).to_have_text(["whole file", "2"])
    assert not axe_violations(view.page)

    files.set_input_files(str(good))
    view.page.get_by_label("Into project (optional)").fill("acme-copy")
    view.page.get_by_role("button", name="Check the file").click()
    expect(view.page.get_by_role("heading", name="The file is fine")).to_be_visible()
    expect(view.page.get_by_role("heading", name="Members of the new project")).to_be_visible()
    assert not Project.objects.filter(slug="acme-copy").exists()
    view.screenshot(f"import-checked-{width}")
    assert not axe_violations(view.page)

    view.page.get_by_label("Give the file's members their roles in the new project").check()
    view.page.get_by_role("button", name="Import now").click()
    expect(view.page.get_by_role("heading", name="Imported", exact=True)).to_be_visible()
    expect(view.page.locator("#import-progress progress")).to_have_attribute("value", "100")
    expect(view.page.locator("#import-progress-label")).to_have_text("Imported.")
    assert Note.objects.filter(
        project__slug="acme-copy", content="Imported through the browser"
    ).exists()
    view.screenshot(f"import-done-{width}")
    assert not axe_violations(view.page)
    assert view.page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    view.page.get_by_role("link", name="Open the project").click()
    imported = view.page.locator(".note-row .c-content", has_text="Imported through the browser")
    expect(imported).to_be_visible()
    assert not view.errors, view.errors
