"""The `hold` review policy (SPEC §2.2), end to end through the API: another run does not find
a held note by search, by id or in recall while its own run (and a run nested in it) does; a
person's approval releases it as reviewed; a trusted agent's notes are found at once; a
rejected note never; switching the policy holds and releases, audited, the revision advancing;
the write's answer and memory_status say so. The full table of read paths under `hold` is
tests/memory/test_visibility_paths.py."""

from __future__ import annotations

from itertools import product

import pytest

from memory_portal.memory import selectors, services
from memory_portal.memory.models import Agent, AuditEvent, MemorySetting, Note

from .conftest import error_code

BASE = "/api/admin/projects/acme-web"
CONTENT = "Staging deploys need the VPN profile named acme-stage"


def _policy(api, tokens, policy: str):
    response = api.call("PUT", f"{BASE}/memory", tokens.manager, {"reviewPolicy": policy})
    assert response.status_code == 204, response.content


def _found(api, token, note_id: str) -> dict:
    """How the run with `token` meets the note: by id, by search, counted by memory_status."""
    by_id = api.tool("memory_read", token, {"id": note_id})
    search = api.tool("memory_search", token, {"query": "staging deploys VPN"}).json()
    return {
        "id": by_id.json()["entries"][0]["trust"] if by_id.status_code == 200 else None,
        "search": [e["id"] for e in search["entries"]] == [note_id],
    }


def test_under_hold_only_the_writing_run_sees_a_note_until_a_person_reviews_it(
    api, tokens, world
):
    _policy(api, tokens, "hold")
    written = api.tool("memory_write", tokens.agent, {"kind": "fact", "content": CONTENT})
    assert written.status_code == 200, written.content
    answer = written.json()
    assert answer["held"] is True and answer["trust"] == "learned"
    note_id = answer["id"]

    nested = services.run_create(actor=None, agent=world.agent2, parent=world.run)
    nested_token = services.token_create(actor=None, run=nested)[1]
    run_b = services.run_create(actor=None, agent=world.agent)  # the same agent, another run
    run_b_token = services.token_create(actor=None, run=run_b)[1]
    unseen = {"id": None, "search": False}
    assert _found(api, tokens.agent, note_id) == {"id": "learned", "search": True}
    assert _found(api, nested_token, note_id) == {"id": "learned", "search": True}
    assert _found(api, tokens.agent2, note_id) == unseen
    assert _found(api, run_b_token, note_id) == unseen
    refused = api.tool("memory_read", tokens.agent2, {"id": note_id})
    assert refused.status_code == 404 and error_code(refused) == "memory_not_found"

    status = api.tool("memory_status", tokens.agent).json()
    assert status["reviewPolicy"] == "hold" and status["heldCount"] == 1
    assert api.tool("memory_status", tokens.agent2).json()["heldCount"] == 0

    # A person approves it: every eligible run finds it, as reviewed.
    response = api.call("PATCH", f"{BASE}/memory/{note_id}", tokens.manager, {"state": "approved"})
    assert response.status_code == 204
    assert _found(api, tokens.agent2, note_id) == {"id": "reviewed", "search": True}
    assert _found(api, run_b_token, note_id) == {"id": "reviewed", "search": True}
    assert api.tool("memory_status", tokens.agent).json()["heldCount"] == 0


def test_a_fact_is_recalled_by_later_runs_only_once_reviewed(api, tokens, world):
    _policy(api, tokens, "hold")
    text = "The cache key includes the locale"
    saved = api.post("/api/v1/memories", tokens.agent, {"text": text})
    assert saved.status_code in (200, 201), saved.content
    fact_id = saved.json()["id"]
    later = services.token_create(
        actor=None, run=services.run_create(actor=None, agent=world.agent)
    )[1]

    def recalled(token) -> bool:
        body = api.post("/api/v1/memories/recall", token, {"query": "cache key locale"}).json()
        return fact_id in [m["id"] for m in body["memories"]]

    assert recalled(tokens.agent) and not recalled(later)
    services.note_approve(actor=world.as_manager, note_id=fact_id)
    assert recalled(later)


def test_a_trusted_agents_note_is_found_at_once_and_stays_to_review(api, tokens, world):
    _policy(api, tokens, "hold")
    response = api.call(
        "PATCH", f"{BASE}/agents/{world.agent.pk}", tokens.manager, {"trusted": True}
    )
    assert response.status_code == 204
    assert Agent.objects.get(pk=world.agent.pk).trusted
    event = AuditEvent.objects.get(action="agent.trust")
    assert event.details == {"from": False, "to": True}
    written = api.tool("memory_write", tokens.agent, {"kind": "fact", "content": CONTENT}).json()
    assert written["held"] is False and written["trust"] == "learned"
    assert _found(api, tokens.agent2, written["id"]) == {"id": "learned", "search": True}
    assert Note.objects.get(pk=written["id"]).trust == "learned"  # still in the review queue

    # Untrusted again: held from other runs once more.
    api.call("PATCH", f"{BASE}/agents/{world.agent.pk}", tokens.manager, {"trusted": False})
    assert _found(api, tokens.agent2, written["id"]) == {"id": None, "search": False}


def test_a_rejected_note_is_never_found_by_another_run(api, tokens, world):
    _policy(api, tokens, "hold")
    note_id = api.tool("memory_write", tokens.agent, {"kind": "fact", "content": CONTENT}).json()[
        "id"
    ]
    api.call("PATCH", f"{BASE}/memory/{note_id}", tokens.manager, {"state": "rejected"})
    found = _found(api, tokens.agent2, note_id)
    assert found["search"] is False and found["id"] in (None, "rejected")
    assert _found(api, tokens.agent2, note_id)["search"] is False
    _policy(api, tokens, "open")
    assert _found(api, tokens.agent2, note_id)["search"] is False


def test_switching_the_policy_holds_and_releases_audited(api, tokens, world):
    note_id = api.tool("memory_write", tokens.agent, {"kind": "fact", "content": CONTENT}).json()[
        "id"
    ]
    assert _found(api, tokens.agent2, note_id)["search"] is True  # open: at once
    before = MemorySetting.objects.get(project=world.project).revision
    fingerprint = api.tool("memory_status", tokens.agent2).json()["fingerprint"]

    _policy(api, tokens, "hold")  # the learned note not yet reviewed is held now
    setting = MemorySetting.objects.get(project=world.project)
    assert setting.review_policy == "hold" and setting.revision == before + 1
    assert _found(api, tokens.agent2, note_id)["search"] is False
    assert api.tool("memory_status", tokens.agent2).json()["fingerprint"] != fingerprint
    held = AuditEvent.objects.get(action="memory.policy")
    assert held.details == {"from": "open", "to": "hold", "held": 1}
    assert held.actor_user_id == world.manager.pk

    _policy(api, tokens, "open")  # released, still learned
    assert _found(api, tokens.agent2, note_id) == {"id": "learned", "search": True}
    released = AuditEvent.objects.filter(action="memory.policy").latest("id")
    assert released.details == {"from": "hold", "to": "open", "released": 1}
    _policy(api, tokens, "open")  # no change: nothing audited, the revision stays
    assert AuditEvent.objects.filter(action="memory.policy").count() == 2


def test_the_policy_api_refuses_bad_input_and_members(api, tokens, world):
    url = f"{BASE}/memory"
    assert error_code(api.call("PUT", url, tokens.manager, {"reviewPolicy": "later"})) == (
        "memory_invalid"
    )
    assert error_code(api.call("PUT", url, tokens.manager, {})) == "memory_invalid"
    assert error_code(api.call("PUT", url, tokens.member, {"reviewPolicy": "hold"})) == (
        "memory_forbidden"
    )
    agent_url = f"{BASE}/agents/{world.agent.pk}"
    response = api.call("PATCH", agent_url, tokens.member, {"trusted": True})
    assert error_code(response) == "memory_forbidden"
    assert not Agent.objects.get(pk=world.agent.pk).trusted
    # Both at once: switched off and held, each its own audited change.
    both = api.call("PUT", url, tokens.manager, {"enabled": False, "reviewPolicy": "hold"})
    assert both.status_code == 204
    setting = MemorySetting.objects.get(project=world.project)
    assert not setting.enabled and setting.review_policy == "hold"
    page = api.get(url, tokens.manager).json()
    assert page["setting"]["reviewPolicy"] == "hold"


@pytest.mark.parametrize("policy", ["open", "hold"])
def test_a_writes_held_answer_is_the_rule_the_reads_use(world, policy):
    """The write answers `held` from what it wrote (`held_as_written`, no statement after its
    commit); the reads hold notes by `held_q`. Every combination of the rule's conditions — the
    policy, the note's trust, a top-level run or none, the writer trusted or not — gets the same
    answer from both."""
    MemorySetting.objects.filter(project=world.project).update(review_policy=policy)
    setting = MemorySetting.objects.get(project=world.project)
    cases = []
    for n, (trust, top, trusted) in enumerate(
        product(["learned", "reviewed"], [True, False], [False, True])
    ):
        Agent.objects.filter(pk=world.agent.pk).update(trusted=trusted)
        writer = Agent.objects.get(pk=world.agent.pk)
        note = services.note_write(
            actor=world.as_agent, kind="fact", content=f"Case {n}: the build cache is warm"
        ).note
        changed = {"trust": trust}
        if not top:
            changed["top_level_run_id"] = ""
        Note.objects.filter(pk=note.pk).update(**changed)
        note.refresh_from_db()
        as_written = selectors.held_as_written(setting=setting, note=note, writer=writer)
        by_rule = note.pk in selectors.held_note_ids(setting=setting, note_ids=[note.pk])
        cases.append(((trust, top, trusted), as_written, by_rule))
    assert [c for c in cases if c[1] != c[2]] == []
    assert any(c[1] for c in cases) == (policy == "hold")
    with pytest.raises(ValueError):  # only its writer says whether a note is held as written
        selectors.held_as_written(setting=setting, note=note, writer=world.agent2)
