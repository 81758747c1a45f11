"""The Connect page and an agent's keys in the dashboard (SPEC §3.4a): a manager picks or
creates an agent, gets a key shown once with ready-to-paste configuration, sees its first
call; revokes keys, renames and retires agents on the agent's page; members cannot."""

from __future__ import annotations

import html
import json
import re

from memory_portal.memory import services
from memory_portal.memory.models import Agent, AgentKey

SLUG = "acme-web"
CONNECT = f"/p/{SLUG}/connect/"


def _secret(page: str) -> str:
    match = re.search(r'<code id="secret" class="secret">(mpk_[^<]+)</code>', page)
    assert match, "no key on the page"
    return match.group(1)


def _snippet(page: str, key: str) -> str:
    match = re.search(rf'<pre id="snippet-{key}"[^>]*>(.*?)</pre>', page, re.S)
    assert match, key
    return html.unescape(match.group(1))


def test_a_manager_connects_a_new_agent_and_gets_its_configuration(world, manager_client):
    page = manager_client.get(CONNECT)
    assert page.status_code == 200 and 'name="label"' in page.content.decode()
    response = manager_client.post(
        CONNECT, {"agent": "new", "name": "Ana's Cursor agent", "stage": "understand",
                  "label": "Ana's Cursor"}  # fmt: skip
    )
    assert response.status_code == 201 and response["Cache-Control"] == "no-store"
    body = response.content.decode()
    secret = _secret(body)
    agent = Agent.objects.get(name="Ana's Cursor agent")
    key = AgentKey.objects.get(agent=agent)
    assert key.label == "Ana's Cursor" and secret.startswith("mpk_")
    assert agent.stage == "understand" and "connects to no memory tools" not in body

    cursor = json.loads(_snippet(body, "cursor"))
    server = cursor["mcpServers"]["memory-portal"]
    assert server["url"] == "http://testserver/mcp"
    assert server["headers"] == {"Authorization": f"Bearer {secret}"}
    vscode = json.loads(_snippet(body, "vscode"))["servers"]["memory-portal"]
    assert vscode["type"] == "http" and vscode["headers"]["Authorization"].endswith(secret)
    desktop = json.loads(_snippet(body, "claude-desktop"))["mcpServers"]["memory-portal"]
    assert desktop["args"] == ["mcp"] and desktop["env"]["MEMORY_PORTAL_TOKEN"] == secret
    assert "claude mcp add --transport http memory-portal http://testserver/mcp" in _snippet(
        body, "claude-code"
    )
    assert "http://testserver/api/runs" in _snippet(body, "curl")
    assert f"export MEMORY_PORTAL_TOKEN={secret}" in _snippet(body, "cli")

    # The "last seen" line: waiting, then the first call with its run.
    seen_url = f"/p/{SLUG}/agents/{agent.pk}/keys/{key.pk}/seen/"
    assert f'hx-get="{seen_url}"' in body and "Waiting" in body
    run, _token = services.key_run_start(key=services_key(secret))
    seen = manager_client.get(seen_url).content.decode()
    assert "Connected" in seen and run.pk[-8:] in seen and "hx-get" not in seen

    # The key is never shown again: not on the agent's page, not on the Connect page.
    agent_page = manager_client.get(f"/p/{SLUG}/agents/{agent.pk}/").content.decode()
    assert secret not in agent_page and key.pk in agent_page
    assert secret not in manager_client.get(CONNECT).content.decode()


def services_key(secret: str):
    from memory_portal.memory.tokens import key_authenticate

    return key_authenticate(secret)


def test_an_existing_agent_is_picked_and_a_bad_form_says_why(world, manager_client):
    picked = manager_client.get(f"{CONNECT}?agent={world.agent.pk}").content.decode()
    assert f'<option value="{world.agent.pk}" selected>' in picked
    response = manager_client.post(CONNECT, {"agent": world.agent.pk, "label": "CI"})
    assert response.status_code == 201
    assert AgentKey.objects.get(agent=world.agent).label == "CI"
    refused = manager_client.post(CONNECT, {"agent": "new", "name": "", "label": "x"})
    assert refused.status_code == 400 and "Name the new agent." in refused.content.decode()
    assert AgentKey.objects.count() == 1


def test_a_stage_without_memory_is_never_taken_by_default_and_its_key_says_so(
    world, manager_client, settings
):
    """A key for an agent of a stage not offered memory connects to nothing: the form has no
    default stage, says which stages get no memory tools, and the key's card warns."""
    page = manager_client.get(CONNECT).content.decode()
    assert '<option value="" selected>Pick a stage…</option>' in page
    assert '<option value="implement">Implement — no memory tools</option>' in page
    assert '<option value="review">Review — reads reviewed notes only</option>' in page
    assert '<option value="understand">Understand</option>' in page
    refused = manager_client.post(CONNECT, {"agent": "new", "name": "Coder", "label": "x"})
    assert refused.status_code == 400
    assert "Pick the new agent's stage." in html.unescape(refused.content.decode())
    assert not Agent.objects.filter(name="Coder").exists()

    made = manager_client.post(
        CONNECT, {"agent": "new", "name": "Coder", "stage": "implement", "label": "x"}
    ).content.decode()
    assert "This key connects to no memory tools." in made and "memory_not_eligible" in made
    coder = Agent.objects.get(name="Coder")
    # The agent list says so too, and the stage list follows MEMORY_ELIGIBLE_STAGES.
    assert f'<option value="{coder.pk}">Coder (implement — no memory tools)</option>' in made
    assert f'<option value="{world.agent.pk}">Runtime helper (runtime)</option>' in made
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "ELIGIBLE_STAGES": ["implement"]}
    page = manager_client.get(CONNECT).content.decode()
    assert '<option value="implement">Implement</option>' in page
    assert "Runtime helper (runtime — no memory tools)" in page


def test_a_manager_changes_an_agents_stage_on_its_page(world, manager_client, member_client):
    coder = services.agent_create(
        actor=None, project=world.project, name="Coder", stage="implement"
    )
    made = manager_client.post(CONNECT, {"agent": coder.pk, "label": "x"}).content.decode()
    assert f"/p/{SLUG}/agents/{coder.pk}/" in made  # the warning links where the stage changes
    page = manager_client.get(f"/p/{SLUG}/agents/{coder.pk}/").content.decode()
    assert '<option value="implement" selected>Implement — no memory tools</option>' in page
    url = f"/p/{SLUG}/agents/{coder.pk}/change/stage/"
    member_client.post(url, {"stage": "design"})
    assert Agent.objects.get(pk=coder.pk).stage == "implement"
    refused = manager_client.post(url, {"stage": "chef"})
    assert refused.status_code == 302 and Agent.objects.get(pk=coder.pk).stage == "implement"
    done = manager_client.post(url, {"stage": "design"})
    assert done.status_code == 302 and Agent.objects.get(pk=coder.pk).stage == "design"
    page = manager_client.get(f"/p/{SLUG}/agents/{coder.pk}/").content.decode()
    assert '<option value="design" selected>Design</option>' in page
    assert "not offered memory tools" not in page


def test_a_key_made_while_memory_is_off_says_so(world, manager_client):
    services.memory_disable(actor=world.as_manager, project=world.project)
    body = manager_client.post(CONNECT, {"agent": world.agent.pk, "label": "CI"}).content.decode()
    assert "Memory is off for" in body and "memory_disabled" in body
    assert "connects to no memory tools" not in body


def test_members_cannot_create_keys(world, member_client, outsider_client):
    page = member_client.get(CONNECT).content.decode()
    assert "A project manager creates agent keys" in page and 'name="label"' not in page
    response = member_client.post(CONNECT, {"agent": world.agent.pk, "label": "CI"})
    assert response.status_code == 403 and not AgentKey.objects.exists()
    assert outsider_client.get(CONNECT).status_code == 404


def test_keys_revoked_agents_renamed_and_retired_on_the_agents_page(world, manager_client):
    key, secret = services.key_create(actor=world.as_manager, agent=world.agent, label="Old")
    base = f"/p/{SLUG}/agents/{world.agent.pk}"
    page = manager_client.get(f"{base}/").content.decode()
    assert "Old" in page and "Revoke" in page and secret not in page
    manager_client.post(f"{base}/change/{key.pk}/")
    assert AgentKey.objects.get(pk=key.pk).revoked_at is not None
    manager_client.post(f"{base}/change/rename/", {"name": "Renamed bot"})
    assert Agent.objects.get(pk=world.agent.pk).name == "Renamed bot"
    manager_client.post(f"{base}/change/retire/")
    assert Agent.objects.get(pk=world.agent.pk).retired_at is not None
    assert "retired" in manager_client.get(f"/p/{SLUG}/agents/").content.decode()
    # A retired agent is not offered on the Connect page.
    assert world.agent.pk not in manager_client.get(CONNECT).content.decode()

    created = manager_client.post(
        f"/p/{SLUG}/agents/new/", {"name": "Fresh", "stage": "review", "application": "storefront"}
    )
    fresh = Agent.objects.get(name="Fresh")
    assert fresh.application.slug == "storefront"
    assert created.status_code == 302 and created["Location"] == f"/p/{SLUG}/agents/{fresh.pk}/"


def test_the_connect_and_agent_pages_do_not_grow_with_agents_or_keys(world, manager_client):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def count(path):
        with CaptureQueriesContext(connection) as queries:
            assert manager_client.get(path).status_code == 200
        return len(queries)

    agent_page = f"/p/{SLUG}/agents/{world.agent.pk}/"
    few = count(CONNECT), count(agent_page)
    for i in range(8):
        services.agent_create(actor=None, project=world.project, name=f"Extra {i}", stage="review")
        services.key_create(actor=world.as_manager, agent=world.agent, label=f"Key {i}")
    assert (count(CONNECT), count(agent_page)) == few
