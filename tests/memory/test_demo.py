"""`manage.py memory_demo`: a realistic demo built through the services, loaded once."""

from __future__ import annotations

import io
import re
import shutil
from datetime import timedelta

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import CommandError, call_command
from django.utils import timezone

from memory_portal.memory import counters, services
from memory_portal.memory.evidence import quote_matches
from memory_portal.memory.management.commands.memory_demo import (
    DEMO_PROJECTS,
    Command,
    login_url,
)
from memory_portal.memory.models import (
    REASON_SUPERSEDED,
    REASON_VETOED,
    Agent,
    AuditEvent,
    Kind,
    Membership,
    MemorySetting,
    Note,
    Project,
    Recovery,
    Repository,
    Role,
    Run,
    RunStatus,
    ScratchpadItem,
    Stage,
    Status,
    Trust,
)
from memory_portal.memory.secrets import find_secret
from memory_portal.memory.selectors import evidence_stale_annotation

pytestmark = pytest.mark.django_db

LOGIN = re.compile(r"Dashboard login: http://127\.0\.0\.1:8000/  user: demo  password: (\S+)")


@pytest.fixture
def var_dir(settings, tmp_path):
    # The demo builds its git repository under VAR_DIR: keep it in the test's own folder.
    settings.VAR_DIR = tmp_path
    return tmp_path


def load(**options) -> str:
    out = io.StringIO()
    call_command("memory_demo", stdout=out, **options)
    return out.getvalue()


def snapshot() -> dict:
    return {
        "projects": Project.objects.count(),
        "agents": Agent.objects.count(),
        "runs": sorted(Run.objects.values_list("id", "status")),
        "notes": sorted(Note.objects.values_list("id", "status", "trust", "updated_at")),
        "recoveries": Recovery.objects.count(),
        "scratchpad": ScratchpadItem.objects.count(),
        "audit": AuditEvent.objects.count(),
        "revisions": sorted(MemorySetting.objects.values_list("revision", flat=True)),
        "users": get_user_model().objects.count(),
    }


def test_demo_loads_a_realistic_world_once(var_dir, monkeypatch):
    # One full load for the whole file keeps it fast; the other tests need none. It loads at
    # four minutes past midnight UTC, today's hardest moment: "today" is then four minutes
    # long, and nothing the demo does today may land in the future.
    real_now = timezone.now
    shift = real_now().replace(hour=0, minute=4, second=0, microsecond=0) - real_now()
    monkeypatch.setattr(timezone, "now", lambda: real_now() + shift)
    monkeypatch.setenv("DEMO_PASSWORD", "correct horse battery staple")
    started = timezone.now()
    out = load()

    projects = {p.slug: p for p in Project.objects.select_related("memory_setting")}
    assert set(projects) == {"acme-web", "payments-core", "legacy-erp"}
    assert [s for s, p in projects.items() if not p.memory_setting.enabled] == ["legacy-erp"]
    assert Note.objects.filter(project=projects["legacy-erp"]).exists()
    for project in projects.values():  # the stored counters, kept by every service it went through
        stored = MemorySetting.objects.values(*counters.FIELDS).get(project=project)
        assert stored == counters.recounted(project.pk), project.slug

    agents = list(Agent.objects.all())
    assert {a.stage for a in agents} == set(Stage.values)
    assert any(a.is_reviewer for a in agents)
    assert set(Run.objects.values_list("status", flat=True)) == set(RunStatus.values)
    assert Run.objects.filter(parent__isnull=False).exists()
    assert Run.objects.filter(task_key="PIN-812").exists()

    notes = Note.objects.all()
    assert 250 <= notes.count() <= 350
    assert set(notes.values_list("trust", flat=True)) == set(Trust.values)
    assert set(notes.values_list("status", flat=True)) == set(Status.values)
    assert set(notes.values_list("kind", flat=True)) == set(Kind.values)
    assert notes.filter(status=Status.ARCHIVED, archive_reason=REASON_VETOED).exists()
    assert AuditEvent.objects.filter(action="note.undo").count() == 1
    assert notes.filter(archive_reason=REASON_SUPERSEDED, superseded_by__isnull=False).exists()
    assert notes.filter(expires_at__lte=timezone.now()).exists()
    assert notes.filter(kind=Kind.DAY).exists()
    assert Recovery.objects.exists()
    assert ScratchpadItem.objects.filter(done=True).exists()
    assert ScratchpadItem.objects.filter(done=False).exists()

    # Evidence: bound to the repository built on the spot; re-pinning left some stale.
    assert (var_dir / "demo-repos" / "legacy-main" / ".git").is_dir()
    bound = notes.exclude(evidence_commit="")
    assert bound.filter(evidence_stale_annotation()).exists()
    assert bound.exclude(evidence_stale_annotation()).exists()

    # Every note came through a service: each has its audit event, spread over about a month.
    written = set(AuditEvent.objects.values_list("note_ref", flat=True))
    assert set(notes.values_list("id", flat=True)) <= written
    month_ago = timezone.now() - timedelta(days=20)
    assert notes.filter(created_at__lt=month_ago).exists()
    assert AuditEvent.objects.filter(created_at__lt=month_ago).exists()
    assert not AuditEvent.objects.filter(created_at__gte=started).exists()
    assert not notes.filter(updated_at__gte=started).exists()
    assert not Run.objects.filter(started_at__gte=started).exists()
    assert not [c for c in notes.values_list("content", flat=True) if find_secret(c)]

    demo = get_user_model().objects.get(username="demo")
    assert not demo.is_superuser
    roles = Membership.objects.filter(user=demo).values_list("project__slug", "role")
    assert sorted(roles) == sorted((slug, Role.MANAGER) for slug in projects)
    viewer = Membership.objects.get(user__username="viewer")
    assert (viewer.project.slug, viewer.role) == ("acme-web", Role.MEMBER)

    assert len(LOGIN.findall(out)) == 1
    assert out.count("correct horse battery staple") == 1
    assert authenticate(username="demo", password="correct horse battery staple") == demo
    assert authenticate(username="viewer", password="correct horse battery staple") is not None

    before = snapshot()
    again = load()
    assert snapshot() == before
    assert "already loaded" in again
    assert "correct horse battery staple" not in again
    assert "password:" not in again

    # A cleaned var/ folder: the next run rebuilds the repository with the same commits.
    shutil.rmtree(var_dir / "demo-repos")
    assert "Rebuilt the demo git repository" in load()
    note = bound.filter(evidence_path="config/ci.yml").get()
    assert quote_matches(
        repo_path=str(var_dir / "demo-repos" / "legacy-main"),
        commit=note.evidence_commit,
        path=note.evidence_path,
        quote=note.evidence_quote,
    )
    assert snapshot() == before

    # What --reset removes before loading again (the load itself is the one above).
    Command(stdout=io.StringIO()).delete_demo()
    assert not Project.objects.exists()
    assert not Repository.objects.exists()
    assert not AuditEvent.objects.exists()
    assert not get_user_model().objects.filter(username__in=["demo", "viewer"]).exists()


def test_demo_login_gets_a_random_password_without_demo_password(monkeypatch):
    monkeypatch.delenv("DEMO_PASSWORD", raising=False)
    password, created = Command(stdout=io.StringIO()).users()
    assert created == {"demo", "viewer"}
    assert len(password) >= 16
    assert authenticate(username="demo", password=password) is not None
    # A later call keeps the existing login.
    assert Command(stdout=io.StringIO()).users()[1] == set()
    assert authenticate(username="demo", password=password) is not None


def test_partial_demo_asks_for_reset(var_dir):
    Project.objects.create(slug="acme-web", name="Acme Web")
    with pytest.raises(CommandError, match="--reset"):
        load()


def test_a_lost_demo_password_is_recovered_with_password(var_dir, monkeypatch):
    monkeypatch.delenv("DEMO_PASSWORD", raising=False)
    first, _ = Command(stdout=io.StringIO()).users()
    for slug in DEMO_PROJECTS:  # the demo as loaded (its contents do not matter here)
        services.project_create(actor=None, slug=slug, name=slug)
    said = load(password="a-new-demo-password-7")
    assert "the password of demo, viewer is now the one given" in said
    assert authenticate(username="demo", password="a-new-demo-password-7") is not None
    assert authenticate(username="viewer", password="a-new-demo-password-7") is not None
    assert authenticate(username="demo", password=first) is None
    assert "--password NEW" in load()  # without it: unchanged, and says how
    with pytest.raises(CommandError, match="too short"):
        load(password="short")


def test_the_login_line_names_the_port_make_run_serves(monkeypatch):
    monkeypatch.setenv("PORT", "8123")
    assert login_url() == "http://127.0.0.1:8123/"
    monkeypatch.delenv("PORT")
    assert login_url() == "http://127.0.0.1:8000/"
