"""The dashboard's concurrency edges, through the HTTP layer: "Run now" of a daily review runs
once while the others are told it is already running, and login throttling lets exactly five
failures through per username and address, however many attempts arrive at once. The threaded
tests need PostgreSQL (real row locks, a connection per thread)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from memory_portal.dashboard import throttling
from memory_portal.memory.models import ReviewRoutine, ReviewRun, Run
from memory_portal.memory.services import routines
from tests.memory.test_concurrency import run_together

from .conftest import client_for, save_fact

SLUG = "acme-web"


def messages_of(response) -> str:
    return " ".join(str(m) for m in get_messages(response.wsgi_request))


def duplicate_facts(world, groups: int = 10) -> None:
    """Work for the review: each group's three spellings merge into one fact."""
    for i in range(groups):
        for text in (
            f"Host {i} needs the VPN",
            f"host {i} needs the vpn.",
            f"HOST {i} NEEDS THE VPN!",
        ):
            save_fact(world, text)


def run_now_url(world) -> str:
    return reverse("dashboard:agent-routine", args=[SLUG, world.agent.pk, "run"])


# --- Run now ------------------------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_run_now_runs_once_and_tells_the_others_it_is_running(world, monkeypatch):
    duplicate_facts(world)
    clients = [client_for(world.member) for _ in range(6)]
    url = run_now_url(world)
    # The review that won holds its place until every other click has been answered, so a
    # click that a busy machine delays past the end of a quick review cannot pass for a
    # second run. Were two reviews started, neither would be released: the wait times out
    # and the counts below fail.
    answered, lock, others_answered = [0], threading.Lock(), threading.Event()
    merge = routines.merge_duplicates

    def held_merge(work):
        others_answered.wait(timeout=15)
        merge(work)

    def click(i):
        response = clients[i].post(url)
        with lock:
            answered[0] += 1
            if answered[0] == len(clients) - 1:
                others_answered.set()
        return response

    monkeypatch.setattr(routines, "merge_duplicates", held_merge)
    responses = run_together(len(clients), click)
    assert all(getattr(r, "status_code", r) == 302 for r in responses), responses
    texts = [messages_of(r) for r in responses]
    done = [t for t in texts if "succeeded" in t]
    running = [t for t in texts if "already running" in t]
    assert len(done) == 1 and len(running) == len(clients) - 1, texts
    assert ReviewRun.objects.count() == 1 and ReviewRun.objects.get().status == "succeeded"
    assert ReviewRun.objects.get().counts["merged"] == 20
    assert not Run.objects.filter(task_key="memory-dreaming", status="failed").exists()
    assert Run.objects.filter(task_key="memory-dreaming").count() == 1


def test_run_now_while_a_review_is_running_is_refused(world, member_client):
    save_fact(world, "A fact")
    routine = ReviewRoutine.objects.get(agent=world.agent)
    running = ReviewRun.objects.create(
        routine=routine, day=timezone.now().date(), trigger="schedule"
    )
    response = member_client.post(run_now_url(world))
    assert response.status_code == 302
    assert "already running" in messages_of(response)
    assert list(ReviewRun.objects.all()) == [running]
    # A review abandoned long ago (its process died) does not block for ever.
    ReviewRun.objects.filter(pk=running.pk).update(started_at=timezone.now() - timedelta(hours=2))
    again = member_client.post(run_now_url(world))
    assert "succeeded" in messages_of(again)
    assert ReviewRun.objects.filter(trigger="manual", status="succeeded").count() == 1


# --- Login throttling ---------------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_thirty_concurrent_wrong_passwords_reach_the_password_check_five_times(world, monkeypatch):
    import django.contrib.auth.forms as auth_forms

    checked = []
    lock = threading.Lock()
    real_authenticate = auth_forms.authenticate

    def counting(*args, **kwargs):
        with lock:
            checked.append(1)
        return real_authenticate(*args, **kwargs)

    monkeypatch.setattr(auth_forms, "authenticate", counting)

    def attempt(_):
        return Client().post(
            reverse("login"),
            {"username": world.manager.username, "password": "wrong"},
            REMOTE_ADDR="10.0.0.1",
        )

    responses = run_together(30, attempt)
    statuses = sorted(getattr(r, "status_code", repr(r)) for r in responses)
    assert len(checked) == throttling.FAILURES_PER_USER_AND_ADDRESS, statuses
    assert statuses.count(200) == 5 and statuses.count(429) == 25, statuses
    # The right password from that address is refused for the rest of the window.
    locked = Client().post(
        reverse("login"),
        {"username": world.manager.username, "password": "pw-12345!"},
        REMOTE_ADDR="10.0.0.1",
    )
    assert locked.status_code == 429


def test_the_window_ends_and_a_success_gives_the_attempts_back(world, client):
    def login(password, address="10.0.0.1"):
        return Client().post(
            reverse("login"),
            {"username": world.manager.username, "password": password},
            REMOTE_ADDR=address,
        )

    for _ in range(5):
        assert login("wrong").status_code == 200
    assert login("pw-12345!").status_code == 429
    # Fifteen minutes later the window is over.
    later = timezone.now() + timedelta(seconds=throttling.WINDOW_SECONDS + 1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(throttling.timezone, "now", lambda: later)
        assert login("pw-12345!").status_code == 302
        for _ in range(5):
            assert login("wrong").status_code == 200
        assert login("pw-12345!").status_code == 429
