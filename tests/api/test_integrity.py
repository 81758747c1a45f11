"""Regressions for the leaks found on 6c6961a, each through the HTTP API (and the dashboard's
edit): rejected knowledge served, reviewers served learned facts, supersede retiring what the
caller could not touch, and forgotten / rejected / vetoed content written back in disguise."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from memory_portal.memory.models import Note
from tests.dashboard.conftest import HTMX, client_for
from tests.memory.helpers import snapshot

from .conftest import error_code

SLUG = "acme-web"
ADMIN = f"/api/admin/projects/{SLUG}/memory"


# --- Small HTTP helpers -----------------------------------------------------------------------


def save(api, token, text, **body):
    """POST /api/v1/memories; the memory object."""
    response = api.post("/api/v1/memories", token, {"text": text, **body})
    assert response.status_code == 201, response.content
    return response.json()


def write(api, token, content, **args):
    """memory_write; the answer {id, trust, status, created}."""
    args.setdefault("kind", "fact")
    response = api.tool("memory_write", token, {"content": content, **args})
    assert response.status_code == 200, response.content
    return response.json()


def review(api, tokens, note_id, state):
    response = api.call("PATCH", f"{ADMIN}/{note_id}", tokens.manager, {"state": state})
    assert response.status_code == 204, response.content


def veto(api, tokens, note_id):
    response = api.post(f"{ADMIN}/{note_id}/veto", tokens.member)
    assert response.status_code == 200, response.content


def listed(api, token, **query) -> list[str]:
    return [row["id"] for row in rows_of(api, token, **query)]


def rows_of(api, token, **query) -> list[dict]:
    url = "/api/v1/memories?" + "&".join(f"{k}={v}" for k, v in query.items())
    response = api.get(url, token)
    assert response.status_code == 200, response.content
    return response.json()["data"]


def recall(api, token, query, **body):
    response = api.post("/api/v1/memories/recall", token, {"query": query, **body})
    assert response.status_code == 200, response.content
    return response.json()


def assert_refused(response, status: int, code: str) -> None:
    got = response.json().get("error", {}).get("code", "no error")
    assert response.status_code == status, f"expected {status} {code}, got {response.status_code}"
    assert error_code(response) == code, f"expected {code}, got {got}"


# --- 1. Rejected knowledge is never served --------------------------------------------------------


def test_a_rejected_fact_leaves_every_v1_list(api, tokens, world):
    kept = save(api, tokens.agent, "The build cache lives in /var/cache/build")
    gone = save(api, tokens.agent, "Deploys need a manual approval on Fridays")
    review(api, tokens, gone["id"], "rejected")
    assert listed(api, tokens.agent) == [kept["id"]], "a rejected fact is never listed"
    assert listed(api, tokens.agent, status="active") == [kept["id"]]
    assert listed(api, tokens.agent, status="all") == [kept["id"]]
    assert listed(api, tokens.agent, status="archived") == []
    assert listed(api, tokens.agent, kind="fact", status="all") == [kept["id"]]
    # Every v1 memory carries its trust.
    assert [row.get("trust") for row in rows_of(api, tokens.agent)] == ["learned"]
    # Still readable by id, marked for what it is.
    by_id = api.tool("memory_read", tokens.agent, {"id": gone["id"]}).json()["entries"][0]
    assert by_id["trust"] == "rejected"
    # People reviewing the agent still see it, with its trust.
    person = api.get(f"/api/v1/memories?agentId={world.agent.id}&status=all", tokens.member)
    trusts = {row["id"]: row["trust"] for row in person.json()["data"]}
    assert trusts == {kept["id"]: "learned", gone["id"]: "rejected"}


def test_a_rejected_day_row_leaves_recall(api, tokens, world):
    fact = save(api, tokens.agent, "The staging deploy needs the VPN switched on")
    rejected_fact = save(api, tokens.agent, "The staging deploy runs from the laptop")
    for line in ("staging deploy started", "staging deploy blocked on VPN"):
        day = api.post("/api/v1/memories/day", tokens.agent, {"line": line}).json()
    before = recall(api, tokens.agent, "staging deploy")
    assert len(before["dayLog"]) == 2 and "staging deploy blocked on VPN" in before["block"]
    review(api, tokens, day["id"], "rejected")
    review(api, tokens, rejected_fact["id"], "rejected")
    after = recall(api, tokens.agent, "staging deploy")
    assert [m["id"] for m in after["memories"]] == [fact["id"]]
    assert after["dayLog"] == []
    assert "staging deploy started" not in after["block"]
    assert "staging deploy blocked" not in after["block"]
    assert day["id"] not in after["block"] and rejected_fact["id"] not in after["block"]
    assert listed(api, tokens.agent, kind="day", status="all") == []
    # A person's recall for the agent shows what the agent is served, no more.
    person = recall(api, tokens.member, "staging deploy", agentId=world.agent.id)
    assert person["dayLog"] == [] and "staging deploy started" not in person["block"]


# --- 2. Reviewers are served reviewed notes only, through v1 too ----------------------------------


def test_a_reviewer_is_served_only_its_reviewed_facts(api, tokens, world):
    learned = save(
        api,
        tokens.manager,
        "Review checklist: look at the migrations first",
        agentId=world.reviewer.id,
    )
    reviewed = save(
        api, tokens.manager, "Review checklist: run the migrations check", agentId=world.reviewer.id
    )
    review(api, tokens, reviewed["id"], "approved")
    assert listed(api, tokens.reviewer) == [reviewed["id"]]
    assert listed(api, tokens.reviewer, status="all") == [reviewed["id"]]
    picked = recall(api, tokens.reviewer, "review checklist migrations")
    assert [m["id"] for m in picked["memories"]] == [reviewed["id"]]
    assert learned["id"] not in picked["block"]
    assert "look at the migrations" not in picked["block"]
    # The tools agree (they were right before).
    found = api.tool("memory_search", tokens.reviewer, {"query": "migrations"}).json()
    assert [e["id"] for e in found["entries"]] == [reviewed["id"]]
    # So does a person's recall for the reviewer.
    person = recall(api, tokens.member, "review checklist migrations", agentId=world.reviewer.id)
    assert [m["id"] for m in person["memories"]] == [reviewed["id"]]


# --- 3. Supersede never does what the caller could not do directly --------------------------------


@pytest.mark.parametrize("trust", ["reviewed", "learned"])
def test_an_agent_cannot_supersede_a_shared_note_through_v1(api, tokens, world, trust):
    shared = write(api, tokens.agent, "Releases are cut from the main branch")
    if trust == "reviewed":
        review(api, tokens, shared["id"], "approved")
        forget = api.tool("memory_forget", tokens.agent, {"id": shared["id"]})
        assert forget.status_code == 403 and error_code(forget) == "memory_trust_locked"
    before = snapshot(world.project)
    response = api.post(
        "/api/v1/memories",
        tokens.agent,
        {"text": "Releases are cut from release branches", "supersedes": shared["id"]},
    )
    assert_refused(response, 400, "memory_agent_mismatch")
    assert snapshot(world.project) == before
    assert Note.objects.get(pk=shared["id"]).status == "active"


@pytest.mark.parametrize("persona", ["member", "manager"])
def test_a_person_cannot_supersede_another_agents_fact(api, tokens, world, persona):
    theirs = save(api, tokens.agent2, "Invoices are generated at midnight UTC")
    before = snapshot(world.project)
    response = api.post(
        "/api/v1/memories",
        getattr(tokens, persona),
        {
            "text": "Invoices are generated at 01:00 UTC",
            "agentId": world.agent.id,
            "supersedes": theirs["id"],
        },
    )
    assert_refused(response, 400, "memory_agent_mismatch")
    assert snapshot(world.project) == before


@pytest.mark.parametrize("trust", ["reviewed", "rejected"])
def test_only_a_manager_supersedes_a_reviewed_or_rejected_fact_through_v1(
    api, tokens, world, trust
):
    fact = save(api, tokens.agent, "The queue holds 100 jobs")
    review(api, tokens, fact["id"], "approved" if trust == "reviewed" else "rejected")
    new = {"text": "The queue holds 250 jobs", "agentId": world.agent.id, "supersedes": fact["id"]}
    before = snapshot(world.project)
    assert_refused(api.post("/api/v1/memories", tokens.member, new), 403, "memory_trust_locked")
    own = {"text": "The queue holds 250 jobs", "supersedes": fact["id"]}
    assert_refused(api.post("/api/v1/memories", tokens.agent, own), 403, "memory_trust_locked")
    assert snapshot(world.project) == before
    done = api.post("/api/v1/memories", tokens.manager, new)
    assert done.status_code == 201 and done.json()["supersedesId"] == fact["id"]
    old = Note.objects.get(pk=fact["id"])
    assert (old.status, old.archive_reason) == ("archived", "superseded")


@pytest.mark.parametrize("trust", ["reviewed", "rejected"])
def test_only_a_manager_edits_a_reviewed_or_rejected_note_in_the_dashboard(
    api, tokens, world, trust
):
    note = write(api, tokens.agent, "Deploys go out on Tuesdays")
    review(api, tokens, note["id"], "approved" if trust == "reviewed" else "rejected")
    url = reverse("dashboard:note-edit", args=[SLUG, note["id"]])
    data = {"content": "Deploys go out on Wednesdays", "next": f"/p/{SLUG}/"}
    before = snapshot(world.project)
    response = client_for(world.member).post(url, data, **HTMX)
    toast = json.loads(response["HX-Trigger"])["toast"]
    assert toast["level"] == "error", f"a member's edit was accepted: {toast['message']}"
    assert response.status_code == 200 and response["HX-Reswap"] == "none"
    assert trust in toast["message"] and toast["hint"]
    assert "project manager" in toast["message"] + toast["hint"]
    assert snapshot(world.project) == before
    done = client_for(world.manager).post(url, data, **HTMX)
    assert json.loads(done["HX-Trigger"])["toast"]["level"] == "success"
    new = Note.objects.get(supersedes_id=note["id"])
    assert new.content == "Deploys go out on Wednesdays" and new.created_by_user == world.manager
    assert Note.objects.get(pk=note["id"]).archive_reason == "superseded"


# --- 4. Never resurrect, whatever the disguise ----------------------------------------------------

BASE = "The staging config file needs 2 approvals"  # holds "fi" and "2" for the NFKC cases


def _full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


VARIANTS = {
    "identical": lambda t: t,
    "case": lambda t: t.swapcase(),
    "upper": lambda t: t.upper(),
    "full-width letters": _full_width,
    "ligature fi": lambda t: t.replace("fi", "\ufb01"),
    "superscript": lambda t: t.replace("2", "\u00b2"),
    "zero-width space": lambda t: t.replace("config", "con\u200bfig"),
    "zero-width joiner": lambda t: t.replace("file", "fi\u200dle"),
    "byte order mark": lambda t: "\ufeff" + t.replace("needs", "ne\ufeffeds"),
    "no-break space": lambda t: t.replace(" ", "\u00a0"),
    "direction marks": lambda t: "\u200f" + t.replace("staging", "stag\u200eing"),
    "soft hyphen": lambda t: t.replace("approvals", "ap\u00adprov\u00adals"),
    "tabs": lambda t: t.replace(" ", "\t", 2),
    "doubled spaces": lambda t: t.replace(" ", "  "),
    "outer whitespace": lambda t: "  " + t + " \t ",
}


def _veto_fact(api, tokens, world):
    veto(api, tokens, save(api, tokens.agent, BASE)["id"])


def _forget_shared(api, tokens, world):
    note = write(api, tokens.agent, BASE, kind="lesson")
    assert api.tool("memory_forget", tokens.agent, {"id": note["id"]}).status_code == 200


def _reject_note(api, tokens, world):
    review(api, tokens, write(api, tokens.agent, BASE, kind="decision")["id"], "rejected")


def _veto_shared(api, tokens, world):
    veto(api, tokens, write(api, tokens.agent, BASE, scope="application")["id"])


def _tool_write(**args):
    def send(api, tokens, world, text):
        return api.tool("memory_write", tokens.agent, {"kind": "fact", "content": text, **args})

    return send


def _v1_save(persona: str):
    def send(api, tokens, world, text):
        body = {"text": text}
        if persona != "agent":
            body["agentId"] = world.agent.id
        return api.post("/api/v1/memories", getattr(tokens, persona), body)

    return send


ROUTES = {
    # name: (how the content was put away, how it comes back, the refusal)
    "vetoed v1 fact -> shared note": (_veto_fact, _tool_write(), "memory_vetoed"),
    "forgotten shared lesson -> v1 fact": (_forget_shared, _v1_save("agent"), "memory_forgotten"),
    "rejected decision -> daily note": (
        _reject_note,
        _tool_write(target="daily"),
        "memory_rejected",
    ),
    "rejected decision -> application lesson": (
        _reject_note,
        _tool_write(kind="lesson", scope="application"),
        "memory_rejected",
    ),
    "vetoed application note -> a person's v1 save": (
        _veto_shared,
        _v1_save("manager"),
        "memory_vetoed",
    ),
}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("route", ROUTES)
def test_put_away_content_never_comes_back(api, tokens, world, route, variant):
    put_away, send, code = ROUTES[route]
    put_away(api, tokens, world)
    text = VARIANTS[variant](BASE)
    assert (text == BASE) == (variant == "identical"), "each variant really differs"
    before = snapshot(world.project)
    response = send(api, tokens, world, text)
    assert_refused(response, 409, code)
    assert snapshot(world.project) == before


INVISIBLE = ["\u200b", "\u200b\u200d\ufeff", "\u00ad\u200e\u200f", " \u2060 \u200b\t"]


@pytest.mark.parametrize("text", INVISIBLE, ids=lambda t: t.encode("unicode_escape").decode())
@pytest.mark.parametrize(
    ("route", "field"),
    [("memory_write", "content"), ("v1 save", "text"), ("v1 day", "line")],
)
def test_invisible_only_content_is_refused(api, tokens, world, route, field, text):
    before = snapshot(world.project)
    if route == "memory_write":
        response = api.tool("memory_write", tokens.agent, {"kind": "fact", "content": text})
    elif route == "v1 save":
        response = api.post("/api/v1/memories", tokens.agent, {"text": text})
    else:
        response = api.post("/api/v1/memories/day", tokens.agent, {"line": text})
    assert_refused(response, 400, "memory_invalid")
    assert response.json()["error"]["field"] == field
    assert snapshot(world.project) == before


SAME_TEXT = [
    "DEPLOYS GO OUT ON TUESDAYS",
    "\uff24\uff45\uff50\uff4c\uff4f\uff59\uff53 go out on Tuesdays",
    "Deploys go out on Tues\u200bdays",
    "Deploys\u00a0go out on\u00a0Tuesdays",
    "Deploys  go out  on Tuesdays",
    "  deploys go\tout on tuesdays \t",
]


def test_the_same_text_in_the_same_place_is_one_note(api, tokens, world):
    shared = write(api, tokens.agent, "Deploys go out on Tuesdays")
    fact = save(api, tokens.agent, "Deploys go out on Tuesdays")
    before = snapshot(world.project)
    for text in SAME_TEXT:
        again = write(api, tokens.agent, text)
        assert (again["id"], again["created"]) == (shared["id"], False), text
        assert save(api, tokens.agent, text)["id"] == fact["id"], text
    assert snapshot(world.project) == before, "an idempotent write changes nothing"
    stored = Note.objects.get(pk=shared["id"])
    assert stored.content == "Deploys go out on Tuesdays", "the first wording is kept"


def test_different_text_or_place_is_a_new_note(api, tokens, world):
    first = write(api, tokens.agent, "Deploys go out on Tuesdays")
    ids = {first["id"]}
    for text in (
        "Deploys go out on Tuesdays.",
        "Deploys go out on Thursdays",
        "Deploys go out on Tues days",
        "Deploys go out on Tuesday",
    ):
        answer = write(api, tokens.agent, text)
        assert answer["created"] and answer["id"] not in ids, text
        ids.add(answer["id"])
    # The same live text elsewhere (another scope, kind or target) is a note of its own.
    for args in ({"scope": "application"}, {"kind": "lesson"}, {"target": "daily"}):
        answer = write(api, tokens.agent, "deploys go out on tuesdays", **args)
        assert answer["created"] and answer["id"] not in ids, args
        ids.add(answer["id"])
    assert Note.objects.filter(project=world.project, status="active").count() == len(ids)
