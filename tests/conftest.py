"""Shared test helpers: personas (manager, member, outsider; agent, reviewer, read-only) and
small factories. No fixture files."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from memory_portal.memory import services
from memory_portal.memory.actors import Actor
from memory_portal.memory.models import MemorySetting, Role, Stage

_TEST_DB_FOLDER = pytest.StashKey[str]()


def pytest_unconfigure(config):
    folder = config.stash.get(_TEST_DB_FOLDER, None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)


def pytest_configure(config):
    from django.conf import settings

    # Password hashing is not under test; the fast hasher keeps the suite quick.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Tests serve static files from the finders; the manifest exists only after collectstatic.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    # SQLite tests use a database file, as production does, not Django's shared-cache in-memory
    # database: there a read that meets another connection's write fails at once ("database
    # table is locked") instead of reading the last commit, which the background vector thread
    # and a live server's requests would hit (WAL lets readers and one writer work together).
    default = settings.DATABASES["default"]
    if default["ENGINE"] == "django.db.backends.sqlite3":
        folder = tempfile.mkdtemp(prefix="memory-portal-tests-")
        config.stash[_TEST_DB_FOLDER] = folder
        default["TEST"] = {**default.get("TEST", {}), "NAME": os.path.join(folder, "test.sqlite3")}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("postgres") and connection.vendor != "postgresql":
            item.add_marker(pytest.mark.skip(reason="needs PostgreSQL: set DATABASE_URL"))


@pytest.fixture(autouse=True)
def _vectors_settled():
    """A test that commits notes (a live server, a transactional test) hands their vectors to
    the background thread; let it finish before the test's database is flushed, so no thread
    writes into the next test, nor sweeps for missing vectors in the middle of it."""
    yield
    from memory_portal.memory.services import vectors

    assert vectors.background.drain(timeout=60), "the vector thread did not settle"
    vectors.background.stop_sweeping()  # importing memory_portal.wsgi starts the sweeps


@pytest.fixture(autouse=True)
def _webhook_passes_by_hand():
    """Tests run webhook delivery passes themselves (services.deliver_due); the background
    thread a commit would wake is not started, and one a test woke ends
    (tests/memory/test_webhooks.py wakes it)."""
    from memory_portal.memory.services import deliveries

    deliveries.background.pause()
    yield
    deliveries.background.pause()


@pytest.fixture(autouse=True)
def _fresh_query_vectors():
    """Each test embeds its queries anew: a cached query vector would hide a model a test
    makes fail (the process keeps them, memory/embeddings.py `query_cache`)."""
    from memory_portal.memory import embeddings

    embeddings.query_cache.clear()


@pytest.fixture
def stored_vectors(monkeypatch):
    """A written note's vector stored as soon as the write returns, in the test's own thread
    and transaction: in production the background thread stores it after the commit
    (services/vectors.py), but a test's transaction never commits, so that thread would never
    be handed the note (tests/memory/test_recall_vectors.py runs the real thread)."""
    from memory_portal.memory.services import vectors

    monkeypatch.setattr(vectors, "store_later", lambda note_id: vectors.embed_notes.call([note_id]))


@pytest.fixture
def make_user(db):
    def make(username: str, *, superuser: bool = False):
        User = get_user_model()
        if superuser:
            return User.objects.create_superuser(username, f"{username}@example.com", "pw-12345!")
        return User.objects.create_user(username, f"{username}@example.com", "pw-12345!")

    return make


@pytest.fixture
def world(db, make_user):
    """One project with memory on: an application, a manager, a member, an outsider, and
    agents (runtime, a second runtime, a reviewer, an ineligible implementer) with runs."""
    return build_world(make_user)


class World:
    pass


def build_world(make_user, slug: str = "acme-web", enabled: bool = True) -> World:
    w = World()
    w.project = services.project_create(actor=None, slug=slug, name="Acme Web")
    if enabled:
        MemorySetting.objects.filter(project=w.project).update(enabled=True)
    w.app = services.application_create(
        actor=None, project=w.project, slug="storefront", name="Storefront"
    )
    w.other_app = services.application_create(
        actor=None, project=w.project, slug="billing", name="Billing"
    )
    w.manager = make_user(f"{slug}-manager")
    w.member = make_user(f"{slug}-member")
    w.outsider = make_user(f"{slug}-outsider")
    services.membership_set(actor=None, project=w.project, user=w.manager, role=Role.MANAGER)
    services.membership_set(actor=None, project=w.project, user=w.member, role=Role.MEMBER)
    w.agent = services.agent_create(
        actor=None, project=w.project, name="Runtime helper", stage=Stage.RUNTIME, application=w.app
    )
    w.agent2 = services.agent_create(
        actor=None,
        project=w.project,
        name="Design agent",
        stage=Stage.DESIGN,
        application=w.other_app,
    )
    w.reviewer = services.agent_create(
        actor=None, project=w.project, name="Code reviewer", stage=Stage.REVIEW, application=w.app
    )
    w.implementer = services.agent_create(
        actor=None, project=w.project, name="Implementer", stage=Stage.IMPLEMENT, application=w.app
    )
    w.run = services.run_create(actor=None, agent=w.agent, task_key="PIN-42")
    w.run2 = services.run_create(actor=None, agent=w.agent2, task_key="PIN-43")
    w.reviewer_run = services.run_create(actor=None, agent=w.reviewer)
    w.implementer_run = services.run_create(actor=None, agent=w.implementer)
    w.as_agent = Actor.agent_run(w.run)
    w.as_agent2 = Actor.agent_run(w.run2)
    w.as_reviewer = Actor.agent_run(w.reviewer_run)
    w.as_implementer = Actor.agent_run(w.implementer_run)
    w.as_readonly = Actor.agent_run(w.run, can_write=False)
    w.as_manager = Actor.person(w.manager)
    w.as_member = Actor.person(w.member)
    w.as_outsider = Actor.person(w.outsider)
    return w
