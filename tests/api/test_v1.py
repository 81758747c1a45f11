"""`/api/v1/memories`: the six routes, their fields and every error code of the source."""

from __future__ import annotations

import pytest

from memory_portal.memory import services
from memory_portal.memory.models import Note

from .conftest import error_code

MEMORY_FIELDS = {
    "id",
    "reviewReason",
    "object",
    "agentId",
    "kind",
    "day",
    "text",
    "expiresAt",
    "expired",
    "status",
    "trust",
    "archiveReason",
    "archivedAt",
    "supersedesId",
    "sourceRunId",
    "sourceTaskKey",
    "createdByAgentId",
    "createdByUserId",
    "recallCount",
    "lastRecalledAt",
    "createdAt",
    "updatedAt",
}


def save(api, token, **body):
    return api.post("/api/v1/memories", token, body)


def test_save_returns_the_memory_object(api, tokens, world):
    response = save(api, tokens.agent, text="The staging deploy needs the VPN on (PIN-812)")
    assert response.status_code == 201
    memory = response.json()
    assert set(memory) == MEMORY_FIELDS
    assert memory["object"] == "memory" and memory["agentId"] == world.agent.id
    assert memory["kind"] == "fact" and memory["status"] == "active" and not memory["expired"]
    assert memory["sourceRunId"] == world.run.id and memory["sourceTaskKey"] == "PIN-42"
    assert memory["createdByAgentId"] == world.agent.id and memory["createdByUserId"] is None
    assert memory["expiresAt"] and memory["recallCount"] == 0


def test_save_with_expiry_and_supersede(api, tokens):
    old = save(api, tokens.agent, text="Staging is on port 8443").json()
    new = save(
        api,
        tokens.agent,
        text="Staging is on port 9443",
        supersedes=old["id"],
        expiresAt="2027-12-31T00:00:00Z",
    ).json()
    assert new["supersedesId"] == old["id"] and new["expiresAt"].startswith("2027-12-31")
    archived = api.get("/api/v1/memories?status=archived", tokens.agent).json()["data"]
    assert [(m["id"], m["archiveReason"]) for m in archived] == [(old["id"], "superseded")]


def test_person_saves_for_a_named_agent(api, tokens, world):
    response = save(api, tokens.member, text="Ana prefers squash merges", agentId=world.agent.id)
    assert response.status_code == 201
    memory = response.json()
    assert memory["agentId"] == world.agent.id and memory["createdByUserId"] == str(world.member.pk)
    assert memory["createdByAgentId"] is None


def test_day_log(api, tokens, world):
    first = api.post("/api/v1/memories/day", tokens.agent, {"line": "fixed the staging deploy"})
    assert first.status_code == 201
    second = api.post("/api/v1/memories/day", tokens.agent, {"line": "PR open, CI green"}).json()
    assert second["id"] == first.json()["id"] and second["kind"] == "day"
    assert second["text"].count("\n") == 1 and "PIN-42 PR open, CI green" in second["text"]
    days = api.get("/api/v1/memories?kind=day", tokens.agent).json()["data"]
    assert [d["id"] for d in days] == [second["id"]]


def test_list_filters_and_limits(api, tokens, world):
    for i in range(3):
        save(api, tokens.agent, text=f"Fact {i}")
    save(api, tokens.agent2, text="Other agent's fact")
    mine = api.get("/api/v1/memories", tokens.agent).json()
    assert mine["object"] == "list" and [m["text"] for m in mine["data"]] == [
        "Fact 2",
        "Fact 1",
        "Fact 0",
    ]
    assert len(api.get("/api/v1/memories?limit=2", tokens.agent).json()["data"]) == 2
    everyone = api.get("/api/v1/memories", tokens.member).json()["data"]
    assert len(everyone) == 4
    one_agent = api.get(f"/api/v1/memories?agentId={world.agent2.id}", tokens.member).json()
    assert [m["text"] for m in one_agent["data"]] == ["Other agent's fact"]
    for bad in ("limit=0", "limit=501", "kind=lesson", "status=forgotten"):
        assert error_code(api.get(f"/api/v1/memories?{bad}", tokens.agent)) == "memory_invalid"
    assert len(api.get("/api/v1/memories?limit=500", tokens.agent).json()["data"]) == 3


def test_archive_and_unarchive(api, tokens):
    memory = save(api, tokens.agent, text="Use Node 18").json()
    archived = api.post(
        f"/api/v1/memories/{memory['id']}/archive", tokens.agent, {"reason": "moved to Node 20"}
    ).json()
    assert archived["status"] == "archived" and archived["archiveReason"] == "moved to Node 20"
    assert archived["archivedAt"]
    back = api.post(f"/api/v1/memories/{memory['id']}/unarchive", tokens.agent).json()
    assert back["status"] == "active" and back["archiveReason"] is None


def test_recall_picks_and_counts(api, tokens, world):
    vpn = save(api, tokens.agent, text="The staging deploy needs the VPN switched on").json()
    save(api, tokens.agent, text="Ana prefers squash merges on the billing repo")
    api.post("/api/v1/memories/day", tokens.agent, {"line": "deployed staging"})
    response = api.post("/api/v1/memories/recall", tokens.agent, {"query": "staging deploy VPN"})
    assert response.status_code == 200, response.content
    recall = response.json()
    assert recall["object"] == "recall" and recall["skipped"] is False
    assert [m["id"] for m in recall["memories"]] == [vpn["id"]]
    assert 0.5 <= recall["memories"][0]["score"] <= 1
    assert recall["block"].startswith("--- MEMORY ---") and vpn["id"] in recall["block"]
    assert any("deployed staging" in line for line in recall["dayLog"])
    assert Note.objects.get(pk=vpn["id"]).recall_count == 1


RELEASE_FACTS = [
    "The staging deploy needs the VPN on; without it the helm upgrade times out after 5 minutes.",
    "Production releases only go out Tuesday to Thursday, 09:00-15:00 UTC.",
    "Celery workers ship in their own chart and must be restarted after any change to tasks.py.",
    "The readiness probe also checks Redis: with Redis down the pods never become ready.",
    "Staging data is reset from an anonymised prod snapshot every Monday 06:00 UTC.",
    "After a frontend release purge the CloudFront cache for /static/*.",
]
# Near the agent's memory, in no words of it, confidently about none of it.
CLOSE_QUESTION = (
    "Our pre-live shipment job sits idle for ages and then aborts. Could working from home matter?"
)


def test_recall_adds_possibly_related_facts_by_meaning(api, tokens, world, settings):
    """The second tier (docs/RECALL.md, "Two tiers"): below the memories, up to 3 facts by
    meaning with scores under 0.5, under their own heading in the block, not counted as
    recalled; nothing for an off-topic question; MEMORY_RECALL_RELATED=0 serves the first
    tier alone."""
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "EMBEDDINGS_ENABLED": True}
    ids = [save(api, tokens.agent, text=text).json()["id"] for text in RELEASE_FACTS]
    url = "/api/v1/memories/recall"
    recall = api.post(url, tokens.agent, {"query": CLOSE_QUESTION}).json()
    assert recall["memories"] == [] and recall["fallback"] is None
    related = recall["related"]
    assert 1 <= len(related) <= 3 and {m["id"] for m in related} <= set(ids)
    scores = [m["score"] for m in related]
    assert all(0 <= score < 0.5 for score in scores) and scores == sorted(scores, reverse=True)
    block = recall["block"]
    heading = block.index("Possibly related (lower confidence):")
    assert all(block.index(m["id"]) > heading for m in related)
    assert "(nothing recalled)" not in block
    assert not Note.objects.filter(recall_count__gt=0).exists()

    off_topic = api.post(url, tokens.agent, {"query": "How do I teach my dog to sit?"}).json()
    assert off_topic["memories"] == off_topic["related"] == []
    assert "(nothing recalled)" in off_topic["block"]

    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "RECALL_RELATED": 0}
    quiet = api.post(url, tokens.agent, {"query": CLOSE_QUESTION}).json()
    assert quiet["related"] == [] and "Possibly related" not in quiet["block"]


def test_start_recall_is_skipped_within_24_hours(api, tokens, world):
    save(api, tokens.agent, text="The staging deploy needs the VPN switched on")
    first = api.post("/api/v1/memories/recall", tokens.agent, {"query": "VPN", "start": True})
    assert first.json()["skipped"] is False
    on_demand = api.post("/api/v1/memories/recall", tokens.agent, {"query": "VPN"}).json()
    assert on_demand["skipped"] is False
    again = api.post("/api/v1/memories/recall", tokens.agent, {"query": "VPN", "start": True})
    assert again.json()["skipped"] is True and again.json()["memories"] == []
    assert again.json()["skipReason"] == "recalled_recently"
    assert first.json()["skipReason"] is None


def test_a_slash_command_gets_no_start_recall_and_keeps_the_window(api, tokens, world):
    """Seed 001: a conversation message that begins with `/` skips the start recall; the
    next message of the run still gets its start recall."""
    from memory_portal.memory.models import Note

    save(api, tokens.agent, text="The staging deploy needs the VPN switched on")
    url = "/api/v1/memories/recall"
    slash = api.post(url, tokens.agent, {"query": "  /deploy staging VPN", "start": True}).json()
    assert (slash["skipped"], slash["skipReason"], slash["memories"]) == (True, "slash_command", [])
    assert slash["block"] == "" and Note.objects.get(kind="fact").recall_count == 0
    message = api.post(url, tokens.agent, {"query": "VPN for staging", "start": True}).json()
    assert message["skipped"] is False and len(message["memories"]) == 1
    on_demand = api.post(url, tokens.agent, {"query": "/ VPN"}).json()  # not a start recall
    assert on_demand["skipped"] is False and on_demand["skipReason"] is None


def test_person_recall_names_the_agent(api, tokens, world):
    save(api, tokens.agent, text="The staging deploy needs the VPN switched on")
    response = api.post(
        "/api/v1/memories/recall", tokens.member, {"query": "VPN", "agentId": world.agent.id}
    )
    assert response.status_code == 200 and len(response.json()["memories"]) == 1
    missing = api.post("/api/v1/memories/recall", tokens.member, {"query": "VPN"})
    assert error_code(missing) == "memory_agent_required"


@pytest.mark.parametrize(
    ("case", "status", "code"),
    [
        ("too_long", 400, "memory_text_too_long"),
        ("secret", 400, "secret_in_memory"),
        ("agent_required", 400, "memory_agent_required"),
        ("agent_mismatch", 400, "memory_agent_mismatch"),
        ("day_append_only", 400, "memory_day_append_only"),
        ("not_own", 403, "memory_not_own"),
        ("day_agent_only", 403, "memory_day_agent_only"),
        ("veto_human_only", 403, "memory_veto_human_only"),
        ("not_found", 404, "memory_not_found"),
        ("supersede_archived", 409, "memory_supersede_archived"),
        ("day_full", 409, "memory_day_full"),
        ("superseded", 409, "memory_superseded"),
        ("day_exists", 409, "memory_day_exists"),
    ],
)
def test_every_v1_error_code(api, tokens, world, case, status, code):
    def fact(text="A fact", token=tokens.agent):
        return save(api, token, text=text).json()

    if case == "too_long":
        response = save(api, tokens.agent, text="x" * 501)
    elif case == "secret":
        response = save(api, tokens.agent, text="aws key AKIAIOSFODNN7EXAMPLQ in prod")
    elif case == "agent_required":
        response = save(api, tokens.member, text="A fact")
    elif case == "agent_mismatch":
        shared = services.note_write(actor=world.as_agent2, kind="fact", content="Shared").note
        response = save(api, tokens.agent, text="New", supersedes=shared.id)
    elif case == "day_append_only":
        day = api.post("/api/v1/memories/day", tokens.agent, {"line": "a line"}).json()
        response = save(api, tokens.agent, text="New", supersedes=day["id"])
    elif case == "not_own":
        response = save(api, tokens.agent, text="A fact", agentId=world.agent2.id)
    elif case == "day_agent_only":
        response = api.post("/api/v1/memories/day", tokens.member, {"line": "a line"})
    elif case == "veto_human_only":
        memory = fact()
        services.note_veto(actor=world.as_member, note_id=memory["id"])
        response = api.post(f"/api/v1/memories/{memory['id']}/unarchive", tokens.agent)
    elif case == "not_found":
        response = api.post("/api/v1/memories/mem_nope/archive", tokens.agent, {"reason": "x"})
    elif case == "supersede_archived":
        memory = fact()
        api.post(f"/api/v1/memories/{memory['id']}/archive", tokens.agent, {"reason": "old"})
        response = save(api, tokens.agent, text="New", supersedes=memory["id"])
    elif case == "day_full":
        for _ in range(26):
            api.post("/api/v1/memories/day", tokens.agent, {"line": "x" * 290})
        response = api.post("/api/v1/memories/day", tokens.agent, {"line": "y" * 290})
    elif case == "superseded":
        old = fact("Old")
        save(api, tokens.agent, text="New", supersedes=old["id"])
        response = api.post(f"/api/v1/memories/{old['id']}/unarchive", tokens.agent)
    else:
        day = api.post("/api/v1/memories/day", tokens.agent, {"line": "first"}).json()
        api.post(f"/api/v1/memories/{day['id']}/archive", tokens.agent, {"reason": "wrong"})
        api.post("/api/v1/memories/day", tokens.agent, {"line": "second"})
        response = api.post(f"/api/v1/memories/{day['id']}/unarchive", tokens.agent)
    assert response.status_code == status, response.content
    assert error_code(response) == code


def test_agents_cannot_touch_other_agents_memories(api, tokens, world):
    theirs = save(api, tokens.agent2, text="Private").json()
    response = api.post(f"/api/v1/memories/{theirs['id']}/archive", tokens.agent, {"reason": "x"})
    assert response.status_code == 404 and error_code(response) == "memory_not_found"
    response = api.get(f"/api/v1/memories?agentId={world.agent2.id}", tokens.agent)
    assert error_code(response) == "memory_not_own"


def test_outsiders_and_readonly_tokens(api, tokens, world):
    response = save(api, tokens.outsider, text="A fact", agentId=world.agent.id)
    assert response.status_code == 404 and error_code(response) == "not_found"
    assert api.get("/api/v1/memories", tokens.outsider).json()["data"] == []
    response = save(api, tokens.agent_readonly, text="A fact")
    assert response.status_code == 403 and error_code(response) == "memory_tool_forbidden"
    assert api.get("/api/v1/memories", tokens.agent_readonly).status_code == 200
