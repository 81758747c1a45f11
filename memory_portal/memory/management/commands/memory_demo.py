"""`manage.py memory_demo`: load a realistic demo (3 projects, agents, runs, ~300 notes), once.

The scenarios are data (memory/demo/scenarios.json); memory/demo/loader.py plays them through
the services."""

from __future__ import annotations

import os
import random
import secrets
import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from memory_portal.memory.demo.loader import VIEWER_USER, DemoLoader
from memory_portal.memory.demo.scenario import build_repository, load_scenario
from memory_portal.memory.models import (
    REASON_SUPERSEDED,
    REASON_VETOED,
    Agent,
    AuditEvent,
    Kind,
    Note,
    Project,
    Recovery,
    Repository,
    Run,
    RunStatus,
    ScratchpadItem,
    Stage,
    Status,
    Trust,
    expired_q,
)
from memory_portal.memory.progress import Progress

DEMO_USER = "demo"


def login_url() -> str:
    """Where `make run` serves (`make run PORT=…` passes its port on)."""
    return f"http://127.0.0.1:{os.environ.get('PORT', '').strip() or '8000'}/"


SCENARIO = load_scenario()
REPO_SLUG = SCENARIO.repo_slug
DEMO_PROJECTS = tuple(spec.slug for spec in SCENARIO.projects)


class Command(BaseCommand):
    help = (
        "Load a realistic demo (projects acme-web, payments-core and legacy-erp, agents, runs, "
        "~300 notes, a git repository for evidence) and a dashboard login. Idempotent; "
        "--reset deletes the demo first; --password sets the demo login's password (a lost "
        "one is recovered so)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--reset",
            action="store_true",
            help="Delete the demo projects, repository, agents and demo users, then load again.",
        )
        parser.add_argument(
            "--password",
            metavar="PASSWORD",
            help="The demo logins' password: used for a new load, and set on users that exist "
            "(how a lost demo password is recovered). Default: DEMO_PASSWORD, else random.",
        )

    def handle(self, *args, reset: bool = False, password: str | None = None, **options):
        started = time.monotonic()
        given = password
        if given is not None:
            try:
                validate_password(given)
            except ValidationError as exc:
                raise CommandError(" ".join(exc.messages)) from exc
        repo_dir = Path(settings.VAR_DIR) / "demo-repos" / REPO_SLUG
        existing = set(
            Project.objects.filter(slug__in=DEMO_PROJECTS).values_list("slug", flat=True)
        )
        if not reset and existing == set(DEMO_PROJECTS):
            if given is not None:
                changed = self.set_password(given)
                self.stdout.write(
                    f"The demo is already loaded; the password of {', '.join(changed)} is now "
                    f"the one given. Dashboard login: {login_url()}  user: {DEMO_USER}"
                )
            else:
                self.stdout.write(
                    "The demo is already loaded; nothing changed. The login is unchanged "
                    f"(user: {DEMO_USER}, password as printed when it was created; "
                    "`manage.py memory_demo --password NEW` sets a new one). "
                    "Use --reset to load it again."
                )
            self.repair_repository(repo_dir)
            self.summary(started)
            return
        if not reset and (existing or Repository.objects.filter(slug=REPO_SLUG).exists()):
            raise CommandError(
                f"Part of the demo exists ({', '.join(sorted(existing)) or REPO_SLUG}); "
                "run `manage.py memory_demo --reset` to replace it."
            )
        with transaction.atomic():
            if reset:
                self.delete_demo()
            password, created = self.users(given)
            loader = DemoLoader(
                now=timezone.now(),
                repo_dir=repo_dir,
                demo=get_user_model().objects.get(username=DEMO_USER),
                scenario=SCENARIO,
                # A fixed seed: every load produces the same demo, so screenshots and
                # walkthroughs stay valid.
                rng=random.Random(SCENARIO.seed),
            )
            steps = len(SCENARIO.projects) + 1  # each project, then the back-dating
            with Progress("loading the demo", total=steps, unit="step", stream=self.stderr) as bar:
                loader.load(progress=bar)
        if DEMO_USER in created:
            self.stdout.write(
                f"Dashboard login: {login_url()}  user: {DEMO_USER}  password: {password}"
            )
        elif given is not None:
            self.stdout.write(f"Dashboard login: {login_url()}  user: {DEMO_USER} (password given)")
        else:
            self.stdout.write(
                f"User {DEMO_USER} already existed; its password is unchanged ({login_url()}; "
                "`manage.py memory_demo --password NEW` sets a new one)."
            )
        if VIEWER_USER in created:
            login = "the same password" if DEMO_USER in created else f"password: {password}"
            self.stdout.write(f"User {VIEWER_USER} (plain member of acme-web): {login}")
        self.summary(started)

    def repair_repository(self, repo_dir: Path) -> None:
        """The git folder lives outside the database (var/ may have been cleaned): rebuild it
        when it is gone. Its commits are deterministic, so the stored evidence still matches."""
        registered = Repository.objects.filter(slug=REPO_SLUG, path=str(repo_dir)).exists()
        if registered and not (repo_dir / ".git").is_dir():
            build_repository(repo_dir)
            self.stdout.write(f"Rebuilt the demo git repository at {repo_dir}.")

    def delete_demo(self) -> None:
        """--reset: the demo's projects (cascading to applications, agents, runs, notes,
        recoveries and scratchpads), its repository, its audit trail and its users."""
        Project.objects.filter(slug__in=DEMO_PROJECTS).delete()
        Repository.objects.filter(slug=REPO_SLUG).delete()
        # The demo's synthetic history goes with it; left behind it would show in the global
        # audit log as events of projects that no longer exist.
        AuditEvent.objects.filter(
            Q(project_ref__in=DEMO_PROJECTS) | Q(project__isnull=True, target_ref=REPO_SLUG)
        ).delete()
        get_user_model().objects.filter(username__in=[DEMO_USER, VIEWER_USER]).delete()
        self.stdout.write("Deleted the previous demo.")

    def set_password(self, password: str) -> list[str]:
        """The demo users' password, set (one slow hash for both); who was changed."""
        users = get_user_model().objects.filter(username__in=[DEMO_USER, VIEWER_USER])
        names = sorted(users.values_list("username", flat=True))
        users.update(password=make_password(password))
        return names

    def users(self, given: str | None = None) -> tuple[str, set[str]]:
        """The demo manager and the viewer; returns (password, usernames created now). A
        password `given` is also set on demo users that exist already."""
        User = get_user_model()
        password = given or os.environ.get("DEMO_PASSWORD") or secrets.token_urlsafe(12)
        if given is not None:
            self.set_password(given)
        missing = {DEMO_USER, VIEWER_USER} - set(
            User.objects.filter(username__in=[DEMO_USER, VIEWER_USER]).values_list(
                "username", flat=True
            )
        )
        if missing:
            # One deliberately slow hash for both users: the viewer shares the demo password.
            hashed = make_password(password)
            for username in sorted(missing):
                User.objects.create(
                    username=username, email=f"{username}@example.com", password=hashed
                )
        return password, missing

    def summary(self, started: float) -> None:
        projects = Project.objects.filter(slug__in=DEMO_PROJECTS).order_by("slug")
        notes = Note.objects.filter(project__in=projects)
        runs = Run.objects.filter(project__in=projects)
        agents = Agent.objects.filter(project__in=projects)
        now = timezone.now()
        write = self.stdout.write

        parts = []
        for project in projects.select_related("memory_setting").annotate(
            apps=Count("applications", distinct=True)
        ):
            state = "on" if project.memory_setting.enabled else "off"
            parts.append(f"{project.slug} (memory {state}, {project.apps} applications)")
        write(f"Projects: {', '.join(parts)}")
        stages = dict(agents.values_list("stage").annotate(n=Count("id")))
        reviewers = sum(1 for a in agents if a.is_reviewer)
        write(
            f"Agents: {agents.count()} ("
            + ", ".join(f"{s} {stages.get(s, 0)}" for s in Stage.values)
            + f"; reviewers {reviewers})"
        )
        statuses = dict(runs.values_list("status").annotate(n=Count("id")))
        nested = runs.filter(parent__isnull=False).count()
        write(
            f"Runs: {runs.count()} ("
            + ", ".join(f"{s} {statuses.get(s, 0)}" for s in RunStatus.values)
            + f"; nested {nested})"
        )
        by_status = dict(notes.values_list("status").annotate(n=Count("id")))
        by_trust = dict(notes.values_list("trust").annotate(n=Count("id")))
        write(
            f"Notes: {notes.count()}; status: "
            + ", ".join(f"{s} {by_status.get(s, 0)}" for s in Status.values)
            + "; trust: "
            + ", ".join(f"{t} {by_trust.get(t, 0)}" for t in Trust.values)
        )
        write(
            "  vetoed {}, superseded {}, expired {}, evidence-bound {}, day rows {}".format(
                notes.filter(status=Status.ARCHIVED, archive_reason=REASON_VETOED).count(),
                notes.filter(archive_reason=REASON_SUPERSEDED).count(),
                notes.filter(expired_q(now)).count(),
                notes.exclude(evidence_commit="").count(),
                notes.filter(kind=Kind.DAY).count(),
            )
        )
        items = ScratchpadItem.objects.filter(project__in=projects)
        write(
            f"Recoveries: {Recovery.objects.filter(project__in=projects).count()}; "
            f"scratchpad items: {items.count()} ({items.filter(done=True).count()} done); "
            f"audit events: {AuditEvent.objects.filter(project__in=projects).count()}"
        )
        write(f"Done in {time.monotonic() - started:.1f} s.")
