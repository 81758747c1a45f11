"""One fixture, every read path: each path must return exactly the notes an independent oracle
(written from SPEC §2.2, §2.3, §2.7, §2.8 and §2.11, never from `selectors.agent_visible_q`)
says the actor may see, under each review policy (`open`; `hold`, with one agent trusted). A
new read path is one more row in PATHS."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from memory_portal.memory import selectors, services
from memory_portal.memory.actors import Actor
from memory_portal.memory.models import Note, Recovery, RepositoryLink
from memory_portal.memory.validation import day_row_identity
from tests.api.conftest import Api

from .test_evidence import QUOTE, README, commit_all, make_repo, write_files

QUERY = "zebra"  # every note of the fixture holds this word, so search and recall match them all
MEM_ID = re.compile(r"mem_[0-9a-z]{26}")
LINE_MARK = re.compile(r"zebra line (\w+)")


# --- The oracle: plain Python from the SPEC ---------------------------------------------------


@dataclass(frozen=True)
class Rec:
    """A note as the oracle sees it: plain values read back from the table."""

    id: str
    label: str
    scope: str
    application_id: int | None
    owner_agent_id: str | None
    kind: str
    target: str
    day: date | None
    trust: str
    status: str
    expires_at: datetime | None
    evidence_repository_id: int | None
    evidence_commit: str
    top_level_run_id: str
    creator_agent_id: str  # "" for a person's note
    forgotten_by_top_level_run: str  # "" unless an agent run forgot it
    marks: tuple[str, ...]  # a day row's line markers


@dataclass(frozen=True)
class Viewer:
    """Whose eyes: an agent's application and stage, and its run's top-level run (None when a
    person previews what the agent would be served)."""

    agent_id: str
    application_id: int | None
    reviewer: bool
    top_run: str | None


class Oracle:
    def __init__(
        self,
        notes: dict[str, Rec],
        links: dict[tuple[int, int], str],
        now: datetime,
        *,
        hold: bool = False,
        trusted: frozenset[str] = frozenset(),
    ):
        self.notes = notes
        self.links = links  # (application, repository) -> pinned commit, as the fixture set them
        self.now = now
        self.hold = hold  # the project's review policy is `hold`
        self.trusted = trusted  # agents a manager trusts

    # §2.2: under `hold`, an untrusted agent run's learned note is seen only by its own
    # top-level run (and the runs nested in it) until a person reviews it.
    def held_from(self, n: Rec, v: Viewer) -> bool:
        return (
            self.hold
            and n.trust == "learned"
            and n.top_level_run_id != ""
            and n.creator_agent_id not in self.trusted
            and n.top_level_run_id != v.top_run
        )

    # §2.3 scopes: project notes, the agent's application's notes, its own private notes.
    def in_reach(self, n: Rec, v: Viewer) -> bool:
        if n.scope == "project":
            return True
        if n.scope == "application":
            return v.application_id is not None and n.application_id == v.application_id
        return n.owner_agent_id == v.agent_id

    # §2.7: evidence-bound notes only while their commit is pinned for the agent's application.
    def evidence_current(self, n: Rec, v: Viewer) -> bool:
        if not n.evidence_commit:
            return True
        pinned = self.links.get((v.application_id, n.evidence_repository_id))
        return pinned == n.evidence_commit

    # §2.8: reviewers see reviewed notes only, never those of their own top-level run.
    def reviewer_allows(self, n: Rec, v: Viewer) -> bool:
        if not v.reviewer:
            return True
        return n.trust == "reviewed" and (v.top_run is None or n.top_level_run_id != v.top_run)

    def expired(self, n: Rec) -> bool:
        return n.expires_at is not None and n.expires_at <= self.now

    def seen_ignoring_status(self, n: Rec, v: Viewer) -> bool:
        return (
            self.in_reach(n, v)
            and self.evidence_current(n, v)
            and self.reviewer_allows(n, v)
            and not self.held_from(n, v)
        )

    def by_id(self, n: Rec, v: Viewer) -> bool:
        """A read by id: forgotten notes are gone; a rejected one shows `trust: rejected`."""
        return n.status != "forgotten" and self.seen_ignoring_status(n, v)

    def served(self, n: Rec, v: Viewer, *, archived: bool = False, expired: bool = False) -> bool:
        """Lists, search, recall, counts: never rejected; live unless the path asks for more."""
        return (
            self.by_id(n, v)
            and n.trust != "rejected"
            and (archived or n.status == "active")
            and (expired or not self.expired(n))
        )

    def select(self, pred: Callable[[Rec], bool]) -> set[str]:
        return {n.label for n in self.notes.values() if pred(n)}


# --- Personas ---------------------------------------------------------------------------------


@dataclass
class Persona:
    name: str
    token: str | None = None
    viewer: Viewer | None = None  # agents
    actor: Actor | None = None
    user: Any = None  # people
    refusal: tuple | None = None  # what every agent path answers this persona


def refused(status: int, code: str | None) -> tuple:
    return ("refused", status, code)


class Refused(Exception):
    def __init__(self, status: int, code: str | None):
        super().__init__(f"{status} {code}")
        self.value = refused(status, code)


@dataclass
class Ctx:
    world: Any
    api: Api
    oracle: Oracle
    personas: dict[str, Persona]
    today: date
    dates: list[date]
    subjects: dict[str, Any]  # agents a person may name in v1 and the dashboard
    by_id: dict[str, str] = field(default_factory=dict)  # note id -> label

    def labels(self, ids) -> set[str]:
        ids = list(ids)
        unknown = [i for i in ids if i not in self.by_id]
        assert not unknown, f"a path returned notes outside the fixture: {unknown}"
        return {self.by_id[i] for i in ids}


def call(ctx: Ctx, method: str, path: str, token: str | None, body=None) -> dict:
    response = ctx.api.call(method, path, token, body)
    if response.status_code >= 400:
        raise Refused(response.status_code, response.json()["error"]["code"])
    assert response.status_code == 200, response.content
    return response.json()


def tool(ctx: Ctx, p: Persona, name: str, body: dict) -> dict:
    return call(ctx, "POST", f"/api/tools/{name}", p.token, body)


def tool_pages(ctx: Ctx, p: Persona, name: str, body: dict, key: str = "entries") -> list[dict]:
    rows: list[dict] = []
    offset = 0
    for _ in range(100):
        page = tool(ctx, p, name, {**body, "limit": 5, "offset": offset})
        rows += page[key]
        offset = page["nextOffset"]
        if offset is None:
            return rows
    raise AssertionError(f"{name} kept paging")


def page_of(ctx: Ctx, user, url: str, **headers) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(url, **headers)
    if response.status_code != 200:
        raise Refused(response.status_code, None)
    return response.content.decode()


# --- The fixture ------------------------------------------------------------------------------

# label -> "scope trust status" as built (status `archived:reason` names the reason); asserted
# after the build so the matrix cannot silently lose a cell.
INTENDED = {
    # project scope, tool writes (A = the agent's run, B = another run of the agent)
    "P1": "project learned active",  # A
    "P2": "project reviewed active",  # A (a nested reviewer of run A must not see it)
    "P3": "project reviewed active",  # B
    "P4": "project learned active",  # B
    "P5": "project rejected active",  # agent2
    "P6": "project reviewed archived:outdated",  # agent2, archived by a person
    "P7": "project reviewed archived:vetoed",  # B
    "P8": "project learned archived:superseded",  # B, edited by the manager into P8n
    "P8n": "project learned active",  # the manager's edit (no run)
    "P9": "project learned forgotten",  # agent2, forgot it itself
    "P9b": "project learned forgotten",  # B, forgotten by run A
    "P10": "project learned forgotten",  # A, forgotten by run A
    "P11": "project reviewed forgotten",  # B, forgotten by the manager
    "P12": "project reviewed active",  # B, expires in a week
    "P13": "project reviewed active",  # B, expired
    "P14": "project learned active",  # A, expired
    "P15": "project rejected archived:old",  # agent2
    "P16": "project reviewed active",  # B, lesson, daily today
    "P17": "project learned active",  # agent2, decision, daily yesterday
    "P18": "project rejected active",  # A, daily today
    "P19": "project learned active",  # agent2, daily today, expired
    "P20": "project learned active",  # agent2 (trusted under `hold`)
    # evidence (c1 = first commit, c2 = second); storefront pins c2, billing pins c1
    "E1": "project reviewed active",  # B, evidence c1: stale for storefront, current for billing
    "E2": "project reviewed active",  # B, evidence c2: current for storefront, stale for billing
    "E3": "application learned active",  # A, storefront, evidence c1: stale
    "E4": "project learned forgotten",  # B, evidence c1, forgotten by the manager
    "E5": "project reviewed active",  # B, lesson, daily today, evidence c1
    # application scope
    "A1": "application learned active",  # A, storefront
    "A2": "application reviewed active",  # B, storefront
    "A3": "application rejected active",  # B, storefront
    "A4": "application learned active",  # agent2, billing
    "A5": "application reviewed active",  # agent2, billing
    "A6": "application learned archived:done",  # B, storefront, archived by the agent
    "A7": "application learned forgotten",  # agent2, billing, forgotten by the manager
    "A8": "application learned active",  # agent2, billing, daily yesterday
    # the agent's private facts (v1)
    "F1": "agent learned active",  # A, default 90-day expiry
    "F2": "agent reviewed active",  # B
    "F3": "agent rejected active",  # A
    "F4": "agent learned archived:stale",  # A, archived by the agent
    "F5": "agent learned archived:vetoed",  # B
    "F6": "agent learned archived:superseded",  # A, superseded by F6n
    "F6n": "agent learned active",  # A
    "F7": "agent learned forgotten",  # A, forgotten by the manager
    "F8": "agent learned active",  # A, expired
    "F9": "agent rejected archived:vetoed",  # B
    "F10": "agent learned active",  # saved by the manager (no run)
    # another agent's private facts
    "G1": "agent learned active",
    "G2": "agent reviewed active",
    # the reviewer's private facts (saved for it by the manager)
    "R1": "agent learned active",
    "R2": "agent reviewed active",
    "R3": "agent reviewed active",  # top-level run = the reviewer's own run
    "R4": "agent rejected active",
    "R5": "agent reviewed archived:retired",
    "R6": "agent reviewed active",  # top-level run = run A (a nested reviewer's own)
    # day rows
    "D1": "agent learned active",  # the agent, today, started by run B
    "D2": "agent rejected active",  # the agent, yesterday
    "D3": "agent learned forgotten",  # the agent, yesterday
    "D4": "agent learned active",  # the agent, three days ago
    "D5": "agent learned archived:closed",  # the agent, yesterday
    "D7": "agent learned active",  # agent2, today
    "RD1": "agent reviewed active",  # the reviewer, today, of its own top-level run
    "RD2": "agent reviewed active",  # the reviewer, yesterday, no run
    "RD3": "agent learned active",  # the reviewer, two days ago
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """A real git repository with two commits; README.md holds QUOTE at both."""
    folder = tmp_path_factory.mktemp("visibility")
    path, first = make_repo(folder, {"README.md": README})
    write_files(Path(path), {"CHANGES.md": "second commit\n"})
    second = commit_all(Path(path), "second")
    return type("Repo", (), {"path": path, "first": first, "second": second})


@pytest.fixture
def ctx(world, repo) -> Ctx:
    return build(world, repo)


@pytest.fixture(params=["open", "hold"])
def any_policy_ctx(request, world, repo) -> Ctx:
    """The fixture under each review policy; under `hold`, agent2 is trusted."""
    return build(world, repo, policy=request.param)


def build(w, repo, policy: str = "open") -> Ctx:
    now = timezone.now()
    today = now.date()
    run_b = services.run_create(actor=None, agent=w.agent, task_key="PIN-44")
    as_b = Actor.agent_run(run_b)
    nested = services.run_create(actor=None, agent=w.reviewer, parent=w.run)
    as_nested = Actor.agent_run(nested)
    m = w.as_manager
    made: dict[str, Note] = {}

    def note(label, actor, **kw):
        kw.setdefault("kind", "fact")
        made[label] = services.note_write(actor=actor, content=f"zebra note {label}", **kw).note

    def fact(label, actor, agent=None, **kw):
        made[label] = services.fact_save(
            actor=actor, text=f"zebra fact {label}", agent_id=agent.pk if agent else None, **kw
        ).note

    def approve(*labels):
        for label in labels:
            services.note_approve(actor=m, note_id=made[label].id)

    def reject(*labels):
        for label in labels:
            services.note_reject(actor=m, note_id=made[label].id)

    def forget(label, actor=m):
        services.note_forget(actor=actor, note_id=made[label].id)

    def archive(label, reason, actor=m):
        services.note_archive(actor=actor, note_id=made[label].id, reason=reason)

    def veto(label):
        services.note_veto(actor=w.as_member, note_id=made[label].id)

    def expire(*labels):  # time passing is set-up, not a product change
        Note.objects.filter(pk__in=[made[x].id for x in labels]).update(
            expires_at=now - timedelta(hours=1)
        )

    def top_run(label, run_id):  # which top-level run a note belongs to
        Note.objects.filter(pk=made[label].id).update(top_level_run_id=run_id)

    def day_row(label, actor, days_ago=0):
        for suffix in "ab":
            row = services.day_append(actor=actor, line=f"zebra line {label}{suffix}")
        if days_ago:
            day = today - timedelta(days=days_ago)
            Note.objects.filter(pk=row.pk).update(
                day=day, place_key=day_row_identity(owner_agent_id=row.owner_agent_id, day=day)
            )
        made[label] = row

    def reviewer_day_row(label, days_ago, trust, top):
        # Reviewers cannot write; their day rows exist only as data (a stage changed later).
        day = today - timedelta(days=days_ago)
        made[label] = Note.objects.create(
            project=w.project,
            scope="agent",
            owner_agent=w.reviewer,
            kind="day",
            target="daily",
            day=day,
            content=f"09:00 zebra line {label}a\n09:05 zebra line {label}b",
            place_key=day_row_identity(owner_agent_id=w.reviewer.pk, day=day),
            trust=trust,
            top_level_run_id=top,
        )

    repository = services.repository_create(actor=None, slug="svc", path=repo.path)
    links: dict[tuple[int, int], str] = {}

    def pin(application, revision):
        services.repository_link_set(
            actor=None, application=application, repository=repository, revision=revision
        )
        links[(application.pk, repository.pk)] = revision

    evidence = {"repositoryId": "svc", "path": "README.md", "quote": QUOTE}
    pin(w.app, repo.first)
    pin(w.other_app, repo.first)
    note("E1", as_b, evidence=evidence)
    note("E3", w.as_agent, scope="application", evidence=evidence)
    note("E4", as_b, evidence=evidence)
    note("E5", as_b, kind="lesson", target="daily", day=today, evidence=evidence)
    pin(w.app, repo.second)
    note("E2", as_b, evidence=evidence)
    approve("E1", "E2", "E5")
    forget("E4")

    note("P1", w.as_agent)
    note("P2", w.as_agent)
    note("P3", as_b)
    note("P4", as_b)
    note("P5", w.as_agent2)
    note("P6", w.as_agent2)
    note("P7", as_b)
    note("P8", as_b)
    note("P9", w.as_agent2)
    note("P9b", as_b)
    note("P10", w.as_agent)
    note("P11", as_b)
    note("P12", as_b, expires_at=now + timedelta(days=7))
    note("P13", as_b)
    note("P14", w.as_agent)
    note("P15", w.as_agent2)
    note("P16", as_b, kind="lesson", target="daily", day=today)
    note("P17", w.as_agent2, kind="decision", target="daily", day=today - timedelta(days=1))
    note("P18", w.as_agent, target="daily", day=today)
    note("P19", w.as_agent2, target="daily", day=today)
    note("P20", w.as_agent2)
    approve("P2", "P3", "P6", "P7", "P11", "P12", "P13", "P16")
    reject("P5", "P15", "P18")
    archive("P6", "outdated")
    veto("P7")
    made["P8n"] = services.note_edit(actor=m, note_id=made["P8"].id, content="zebra note P8n").note
    forget("P9", w.as_agent2)
    forget("P9b", w.as_agent)
    forget("P10", w.as_agent)
    forget("P11")
    expire("P13", "P14", "P19")
    archive("P15", "old")

    note("A1", w.as_agent, scope="application")
    note("A2", as_b, scope="application")
    note("A3", as_b, scope="application")
    note("A4", w.as_agent2, scope="application")
    note("A5", w.as_agent2, scope="application")
    note("A6", as_b, scope="application")
    note("A7", w.as_agent2, scope="application")
    yesterday = today - timedelta(days=1)
    note("A8", w.as_agent2, scope="application", kind="lesson", target="daily", day=yesterday)
    approve("A2", "A5")
    reject("A3")
    archive("A6", "done", as_b)
    forget("A7")

    fact("F1", w.as_agent)
    fact("F2", as_b)
    fact("F3", w.as_agent)
    fact("F4", w.as_agent)
    fact("F5", as_b)
    fact("F6", w.as_agent)
    made["F6n"] = services.fact_save(
        actor=w.as_agent, text="zebra fact F6n", supersedes=made["F6"].id
    ).note
    fact("F7", w.as_agent)
    fact("F8", w.as_agent)
    fact("F9", as_b)
    fact("F10", m, agent=w.agent)
    approve("F2")
    reject("F3", "F9")
    archive("F4", "stale", w.as_agent)
    veto("F5")
    veto("F9")
    forget("F7")
    expire("F8")

    fact("G1", w.as_agent2)
    fact("G2", w.as_agent2)
    approve("G2")

    for label in ("R1", "R2", "R3", "R4", "R5", "R6"):
        fact(label, m, agent=w.reviewer)
    approve("R2", "R3", "R5", "R6")
    reject("R4")
    archive("R5", "retired")
    top_run("R3", w.reviewer_run.top_level_run_id)
    top_run("R6", w.run.top_level_run_id)

    day_row("D4", w.as_agent, days_ago=3)
    day_row("D5", w.as_agent, days_ago=1)
    archive("D5", "closed", w.as_agent)
    day_row("D3", w.as_agent, days_ago=1)
    forget("D3")
    day_row("D2", w.as_agent, days_ago=1)
    reject("D2")
    day_row("D1", as_b)
    day_row("D7", w.as_agent2)
    reviewer_day_row("RD1", 0, "reviewed", w.reviewer_run.top_level_run_id)
    reviewer_day_row("RD2", 1, "reviewed", "")
    reviewer_day_row("RD3", 2, "learned", "")

    # The links as the fixture set them (the oracle's source), checked against the table.
    assert (
        dict(
            ((link.application_id, link.repository_id), link.revision)
            for link in RepositoryLink.objects.all()
        )
        == links
    )

    forgotten_by = dict(Recovery.objects.values_list("note_id", "forgotten_by_top_level_run_id"))
    labels = {n.id: label for label, n in made.items()}
    records: dict[str, Rec] = {}
    for n in Note.objects.filter(project=w.project):
        records[n.id] = Rec(
            id=n.id,
            label=labels[n.id],
            scope=n.scope,
            application_id=n.application_id,
            owner_agent_id=n.owner_agent_id,
            kind=n.kind,
            target=n.target,
            day=n.day,
            trust=n.trust,
            status=n.status,
            expires_at=n.expires_at,
            evidence_repository_id=n.evidence_repository_id,
            evidence_commit=n.evidence_commit,
            top_level_run_id=n.top_level_run_id,
            creator_agent_id=n.created_by_agent_id,
            forgotten_by_top_level_run=forgotten_by.get(n.id, ""),
            marks=tuple(LINE_MARK.findall(n.content)) if n.kind == "day" else (),
        )
        built = f"{n.scope} {n.trust} {n.status}" + (
            f":{n.archive_reason}" if n.status == "archived" else ""
        )
        assert built == INTENDED[labels[n.id]], f"{labels[n.id]} was built as {built}"
    assert set(labels.values()) == set(INTENDED)

    trusted: frozenset[str] = frozenset()
    if policy == "hold":
        services.memory_policy_set(actor=m, project=w.project, policy="hold")
        services.agent_change(actor=m, agent=w.agent2, trusted=True)
        trusted = frozenset({w.agent2.pk})
    personas = _personas(w, run_b, as_b, nested, as_nested)
    return Ctx(
        world=w,
        api=Api(Client()),
        oracle=Oracle(records, links, timezone.now(), hold=policy == "hold", trusted=trusted),
        personas=personas,
        today=today,
        dates=[today - timedelta(days=d) for d in range(4)],
        subjects={"agent": w.agent, "reviewer": w.reviewer},
        by_id=labels,
    )


def _personas(w, run_b, as_b, nested, as_nested) -> dict[str, Persona]:
    def agent(name, run, actor, *, can_write=True, refusal=None):
        token = services.token_create(actor=None, run=run, can_write=can_write)[1]
        a = run.agent
        viewer = Viewer(a.pk, a.application_id, a.is_reviewer, run.top_level_run_id)
        return Persona(name, token=token, viewer=viewer, actor=actor, refusal=refusal)

    def person(name, user):
        token = services.token_create(actor=None, user=user)[1]
        return Persona(name, token=token, user=user)

    people = [
        agent("agent", w.run, w.as_agent),
        agent("readonly", w.run, w.as_readonly, can_write=False),
        agent("agent_b", run_b, as_b),
        agent("agent2", w.run2, w.as_agent2),
        agent("reviewer", w.reviewer_run, w.as_reviewer),
        agent("reviewer_nested", nested, as_nested),
        agent(
            "implementer",
            w.implementer_run,
            w.as_implementer,
            refusal=refused(403, "memory_not_eligible"),
        ),
        person("manager", w.manager),
        person("member", w.member),
        person("outsider", w.outsider),
    ]
    return {p.name: p for p in people}


def preview_viewer(agent) -> Viewer:
    """What a person's recall for an agent is judged by: that agent's eyes, no run."""
    return Viewer(agent.pk, agent.application_id, agent.is_reviewer, None)


# --- The paths --------------------------------------------------------------------------------

AGENTS = ("agent", "readonly", "agent_b", "agent2", "reviewer", "reviewer_nested", "implementer")
PEOPLE = ("manager", "member", "outsider")


def read_by_id(ctx: Ctx, p: Persona):
    seen = {}
    for n in ctx.oracle.notes.values():
        try:
            entry = tool(ctx, p, "memory_read", {"id": n.id})["entries"][0]
        except Refused as refusal:
            if refusal.value != refused(404, "memory_not_found"):
                raise
            continue
        assert entry["id"] == n.id
        seen[n.label] = entry["trust"]
    return seen


def expect_by_id(ctx: Ctx, p: Persona):
    o = ctx.oracle
    return {n.label: n.trust for n in o.notes.values() if o.by_id(n, p.viewer)}


def read_long_term(ctx: Ctx, p: Persona):
    return ctx.labels(e["id"] for e in tool_pages(ctx, p, "memory_read", {"target": "long_term"}))


def expect_long_term(ctx: Ctx, p: Persona):
    o = ctx.oracle
    return o.select(lambda n: o.served(n, p.viewer) and n.target == "long_term")


def read_daily(ctx: Ctx, p: Persona):
    today = tool_pages(ctx, p, "memory_read", {"target": "daily"})
    out = {"default": ctx.labels(e["id"] for e in today)}
    for d in ctx.dates:
        body = {"target": "daily", "date": d.isoformat()}
        out[d.isoformat()] = ctx.labels(e["id"] for e in tool_pages(ctx, p, "memory_read", body))
    return out


def expect_daily(ctx: Ctx, p: Persona):
    o = ctx.oracle

    def on(d):
        return o.select(lambda n: o.served(n, p.viewer) and n.target == "daily" and n.day == d)

    return {"default": on(ctx.today), **{d.isoformat(): on(d) for d in ctx.dates}}


def read_dates(ctx: Ctx, p: Persona):
    rows = tool_pages(ctx, p, "memory_read", {"target": "list"}, key="dates")
    return {row["date"]: row["count"] for row in rows}


def expect_dates(ctx: Ctx, p: Persona):
    o = ctx.oracle
    days = Counter(
        n.day.isoformat() for n in o.notes.values() if o.served(n, p.viewer) and n.target == "daily"
    )
    return dict(days)


def read_search(ctx: Ctx, p: Persona):
    return ctx.labels(e["id"] for e in tool_pages(ctx, p, "memory_search", {"query": QUERY}))


def expect_search(ctx: Ctx, p: Persona):
    return ctx.oracle.select(lambda n: ctx.oracle.served(n, p.viewer))


def read_recoveries(ctx: Ctx, p: Persona):
    rows = tool_pages(ctx, p, "memory_read", {"target": "recoveries"})
    return ctx.labels(r["id"] for r in rows)


def expect_recoveries(ctx: Ctx, p: Persona):
    # §2.5: the recoverable learned notes of the agent's scope; the note itself must be one the
    # agent could read (the same reach, evidence and reviewer rules as every other read).
    o = ctx.oracle
    return o.select(
        lambda n: (
            n.status == "forgotten" and n.trust == "learned" and o.seen_ignoring_status(n, p.viewer)
        )
    )


def read_status(ctx: Ctx, p: Persona):
    return tool(ctx, p, "memory_status", {})["noteCount"]


def expect_status(ctx: Ctx, p: Persona):
    return len(expect_search(ctx, p))


def read_fingerprint(ctx: Ctx, p: Persona):
    """Which notes change the fingerprint when they change (each change rolled back)."""
    base = selectors.fingerprint(actor=p.actor)
    far = timezone.now() + timedelta(days=365)
    changed = set()
    for n in ctx.oracle.notes.values():
        with transaction.atomic():
            # A change that keeps the note as visible (or invisible) as it was.
            shifted = n.expires_at + timedelta(seconds=1) if n.expires_at else far
            Note.objects.filter(pk=n.id).update(expires_at=shifted)
            if selectors.fingerprint(actor=p.actor) != base:
                changed.add(n.label)
            transaction.set_rollback(True)
    assert selectors.fingerprint(actor=p.actor) == base
    return changed


def expect_fingerprint(ctx: Ctx, p: Persona):
    # §2.11: what the caller can see, except what its own top-level run wrote or forgot (a note
    # its run forgot still counts as seen, in the state it had, if the caller could see it).
    o, v = ctx.oracle, p.viewer
    return o.select(
        lambda n: (
            n.top_level_run_id != v.top_run
            and (
                o.served(n, v)
                or (n.forgotten_by_top_level_run == v.top_run and o.seen_ignoring_status(n, v))
            )
        )
    )


V1_STATUSES = ("active", "archived", "all")


def read_v1_list(ctx: Ctx, p: Persona):
    out = {}
    for status in V1_STATUSES:
        rows = call(ctx, "GET", f"/api/v1/memories?status={status}", p.token)["data"]
        out[status] = ctx.labels(row["id"] for row in rows)
        out[f"{status}: trust of each"] = {ctx.by_id[row["id"]]: row.get("trust") for row in rows}
    return out


def _v1_status_ok(n: Rec, status: str) -> bool:
    return n.status != "forgotten" if status == "all" else n.status == status


def expect_v1_list(ctx: Ctx, p: Persona):
    o, v = ctx.oracle, p.viewer
    out = {}
    for status in V1_STATUSES:
        out[status] = o.select(
            lambda n, status=status: (
                n.scope == "agent"
                and n.owner_agent_id == v.agent_id
                and n.kind in ("fact", "day")
                and o.served(n, v, archived=status != "active", expired=True)
                and _v1_status_ok(n, status)
            )
        )
        by_label = {n.label: n for n in o.notes.values()}
        out[f"{status}: trust of each"] = {x: by_label[x].trust for x in out[status]}
    return out


def _recall_result(ctx: Ctx, memories: list[str], day_log: list[str], block: str) -> dict:
    return {
        "memories": ctx.labels(memories),
        "dayLog": {mark for line in day_log for mark in LINE_MARK.findall(line)},
        "block ids": ctx.labels(set(MEM_ID.findall(block))),
        "block lines": set(LINE_MARK.findall(block)),
    }


def read_v1_recall(ctx: Ctx, p: Persona):
    body = call(ctx, "POST", "/api/v1/memories/recall", p.token, {"query": QUERY})
    ids = [m["id"] for m in body["memories"]]
    return _recall_result(ctx, ids, body["dayLog"], body["block"])


def _expect_recall(ctx: Ctx, v: Viewer) -> dict:
    o = ctx.oracle
    mine = [
        n
        for n in o.notes.values()
        if n.scope == "agent" and n.owner_agent_id == v.agent_id and o.served(n, v)
    ]
    facts = {n.label for n in mine if n.kind == "fact"}
    recent = (ctx.today, ctx.today - timedelta(days=1))
    lines = {mark for n in mine if n.kind == "day" and n.day in recent for mark in n.marks}
    return {"memories": facts, "dayLog": lines, "block ids": facts, "block lines": lines}


def expect_v1_recall(ctx: Ctx, p: Persona):
    return _expect_recall(ctx, p.viewer)


def read_person_v1_list(ctx: Ctx, p: Persona):
    out = {}
    for name, subject in ctx.subjects.items():
        for status in V1_STATUSES:
            url = f"/api/v1/memories?agentId={subject.pk}&status={status}"
            rows = call(ctx, "GET", url, p.token)["data"]
            out[f"{name} {status}"] = ctx.labels(row["id"] for row in rows)
    return out


def expect_person_v1_list(ctx: Ctx, p: Persona):
    if p.name == "outsider":
        return refused(404, "not_found")
    o = ctx.oracle
    return {
        f"{name} {status}": o.select(
            lambda n, subject=subject, status=status: (
                n.scope == "agent"
                and n.owner_agent_id == subject.pk
                and n.kind in ("fact", "day")
                and _v1_status_ok(n, status)
            )
        )
        for name, subject in ctx.subjects.items()
        for status in V1_STATUSES
    }


def read_person_v1_recall(ctx: Ctx, p: Persona):
    out = {}
    for name, subject in ctx.subjects.items():
        body = {"query": QUERY, "agentId": subject.pk}
        data = call(ctx, "POST", "/api/v1/memories/recall", p.token, body)
        ids = [m["id"] for m in data["memories"]]
        out[name] = _recall_result(ctx, ids, data["dayLog"], data["block"])
    return out


def expect_person_recall(ctx: Ctx, p: Persona):
    if p.name == "outsider":
        return refused(404, "not_found")
    return {name: _expect_recall(ctx, preview_viewer(a)) for name, a in ctx.subjects.items()}


def read_dashboard_preview(ctx: Ctx, p: Persona):
    out = {}
    slug = ctx.world.project.slug
    for name, subject in ctx.subjects.items():
        url = reverse("dashboard:agent-recall", args=[slug, subject.pk]) + f"?query={QUERY}"
        html = page_of(ctx, p.user, url, HTTP_HX_REQUEST="true")
        block = html[html.index("--- MEMORY ---") : html.index("--- END MEMORY ---")]
        picked = set(MEM_ID.findall(html[: html.index("--- MEMORY ---")]))
        out[name] = {
            "memories": ctx.labels(picked),
            "block ids": ctx.labels(set(MEM_ID.findall(block))),
            "block lines": set(LINE_MARK.findall(block)),
        }
    return out


def expect_dashboard_preview(ctx: Ctx, p: Persona):
    if p.name == "outsider":
        return refused(404, None)
    out = {}
    for name, result in expect_person_recall(ctx, p).items():
        out[name] = {k: v for k, v in result.items() if k != "dayLog"}
    return out


def read_dashboard_table(ctx: Ctx, p: Persona):
    url = reverse("dashboard:project", args=[ctx.world.project.slug]) + "?per_page=100"
    html = page_of(ctx, p.user, url)
    return ctx.labels(set(re.findall(r'<tr id="note-(mem_[0-9a-z]{26})"', html)))


def expect_every_note(ctx: Ctx, p: Persona):
    if p.name == "outsider":
        return refused(404, None)
    return {n.label for n in ctx.oracle.notes.values()}


def read_admin_list(ctx: Ctx, p: Persona):
    project = ctx.world.project.slug
    ids, offset = [], 0
    while offset is not None:
        url = f"/api/admin/projects/{project}/memory?limit=100&offset={offset}"
        page = call(ctx, "GET", url, p.token)
        ids += [row["id"] for row in page["notes"]]
        offset = page["nextOffset"]
    return ctx.labels(ids)


def expect_admin_list(ctx: Ctx, p: Persona):
    if p.name == "member":
        return refused(403, "memory_forbidden")
    if p.name == "outsider":
        return refused(404, "not_found")
    return expect_every_note(ctx, p)


@dataclass(frozen=True)
class ReadPath:
    name: str
    actors: tuple[str, ...]
    read: Callable[[Ctx, Persona], Any]
    expect: Callable[[Ctx, Persona], Any]


PATHS = [
    ReadPath("tool memory_read id", AGENTS, read_by_id, expect_by_id),
    ReadPath("tool memory_read long_term", AGENTS, read_long_term, expect_long_term),
    ReadPath("tool memory_read daily", AGENTS, read_daily, expect_daily),
    ReadPath("tool memory_read list", AGENTS, read_dates, expect_dates),
    ReadPath("tool memory_read recoveries", AGENTS, read_recoveries, expect_recoveries),
    ReadPath("tool memory_search", AGENTS, read_search, expect_search),
    ReadPath("tool memory_status noteCount", AGENTS, read_status, expect_status),
    ReadPath("fingerprint", AGENTS[:-1], read_fingerprint, expect_fingerprint),
    ReadPath("v1 GET memories", AGENTS, read_v1_list, expect_v1_list),
    ReadPath("v1 recall", AGENTS, read_v1_recall, expect_v1_recall),
    ReadPath("v1 GET memories (person)", PEOPLE, read_person_v1_list, expect_person_v1_list),
    ReadPath("v1 recall (person)", PEOPLE, read_person_v1_recall, expect_person_recall),
    ReadPath("dashboard recall preview", PEOPLE, read_dashboard_preview, expect_dashboard_preview),
    ReadPath("dashboard notes table", PEOPLE, read_dashboard_table, expect_every_note),
    ReadPath("admin memory list", PEOPLE, read_admin_list, expect_admin_list),
]


def _diff(expected, got) -> str:
    if isinstance(expected, set) and isinstance(got, set):
        return f"missing {sorted(expected - got)}, extra {sorted(got - expected)}"
    if isinstance(expected, dict) and isinstance(got, dict):
        parts = [
            f"{key}: {_diff(expected.get(key), got.get(key))}"
            for key in sorted(set(expected) | set(got), key=str)
            if expected.get(key) != got.get(key)
        ]
        return "; ".join(parts)
    return f"expected {expected!r}, got {got!r}"


@pytest.mark.parametrize("path", PATHS, ids=[p.name for p in PATHS])
def test_every_read_path_returns_exactly_what_the_oracle_allows(any_policy_ctx, path):
    ctx = any_policy_ctx
    failures = []
    for name in path.actors:
        persona = ctx.personas[name]
        expected = persona.refusal or path.expect(ctx, persona)
        try:
            got = path.read(ctx, persona)
        except Refused as refusal:
            got = refusal.value
        if got != expected:
            failures.append(f"{path.name} as {name}: {_diff(expected, got)}")
    assert not failures, "\n".join(failures)


def test_the_fixture_exercises_every_clause(any_policy_ctx):
    """Each clause of the rule decides at least one note for at least one agent, so a path
    that skips a clause cannot pass by accident."""
    ctx = any_policy_ctx
    o = ctx.oracle
    agents = [ctx.personas[n] for n in AGENTS[:-1]]
    clauses = {
        "reach": lambda n, v: not o.in_reach(n, v),
        "forgotten": lambda n, v: o.in_reach(n, v) and n.status == "forgotten",
        "evidence": lambda n, v: o.in_reach(n, v) and not o.evidence_current(n, v),
        "reviewer trust": lambda n, v: v.reviewer and o.in_reach(n, v) and n.trust != "reviewed",
        "reviewer own run": lambda n, v: (
            v.reviewer
            and o.in_reach(n, v)
            and n.trust == "reviewed"
            and n.top_level_run_id == v.top_run
        ),
        "rejected": lambda n, v: o.by_id(n, v) and n.trust == "rejected",
        "archived": lambda n, v: o.by_id(n, v) and n.status == "archived",
        "expired": lambda n, v: o.by_id(n, v) and o.expired(n),
    }
    if o.hold:
        o_open = Oracle(o.notes, o.links, o.now)
        clauses |= {
            # held from another run of the same agent, and from other agents
            "hold": lambda n, v: o_open.by_id(n, v) and o.held_from(n, v),
            # its own run sees what it wrote while it is held
            "hold own run": lambda n, v: (
                o.by_id(n, v) and n.trust == "learned" and n.top_level_run_id == v.top_run
                and n.creator_agent_id not in o.trusted
            ),
            # a trusted agent's learned note, seen by another run
            "trusted": lambda n, v: (
                o.by_id(n, v) and n.trust == "learned" and n.creator_agent_id in o.trusted
                and n.top_level_run_id != v.top_run
            ),
        }  # fmt: skip
    for clause, decides in clauses.items():
        for kind in ("long_term", "daily"):
            hits = [
                (p.name, n.label)
                for p in agents
                for n in o.notes.values()
                if n.target == kind and decides(n, p.viewer)
            ]
            assert hits, f"no {kind} note is decided by the {clause} clause"


# --- The fingerprint under real changes --------------------------------------------------------


def test_fingerprint_follows_real_changes(ctx):
    w = ctx.world
    p = ctx.personas
    note_id = {n.label: n.id for n in ctx.oracle.notes.values()}
    fp = {name: selectors.fingerprint(actor=p[name].actor) for name in AGENTS[:-1]}

    def changed() -> set[str]:
        now = {name: selectors.fingerprint(actor=p[name].actor) for name in fp}
        moved = {name for name in fp if now[name] != fp[name]}
        fp.update(now)
        return moved

    # Run B appends a line to today's day row (it started it): run A sees new content.
    services.day_append(actor=p["agent_b"].actor, line="zebra line D1c")
    assert changed() == {"agent", "readonly"}
    # A manager approves a learned note of run B: whoever sees it, reviewers now too.
    services.note_approve(actor=w.as_manager, note_id=note_id["P4"])
    assert changed() == {"agent", "readonly", "agent2", "reviewer", "reviewer_nested"}
    # A member vetoes a note whose evidence is current only for billing: only agent2 saw it.
    services.note_veto(actor=w.as_member, note_id=note_id["E1"])
    assert changed() == {"agent2"}
    # A manager restores a learned note that run A forgot: agent2 sees it again; reviewers never
    # saw it, not even the one nested in run A.
    recovery = Recovery.objects.get(note_id=note_id["P9b"])
    services.note_restore(actor=w.as_manager, recovery_id=recovery.pk)
    moved = changed()
    assert "agent2" in moved
    assert not moved & {"agent_b", "reviewer", "reviewer_nested"}, moved
