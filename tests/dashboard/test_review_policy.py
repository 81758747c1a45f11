"""The review policy and trusted agents in the dashboard (SPEC §2.2, §4): Settings switches
the policy (managers; members read it), an agent's page trusts or untrusts it, the agents
list shows who is trusted, and under `hold` the review queue and the Overview say how many
notes are held and for how long, each held row marked."""

from __future__ import annotations

from django.urls import reverse

from memory_portal.memory import services
from memory_portal.memory.actors import Actor
from memory_portal.memory.models import Agent, AuditEvent, MemorySetting

from .conftest import write_note

SLUG = "acme-web"


def _setting(world) -> MemorySetting:
    return MemorySetting.objects.get(project=world.project)


def test_a_manager_switches_the_policy_in_settings(world, manager_client, member_client):
    page = manager_client.get(reverse("dashboard:settings", args=[SLUG])).content.decode()
    assert "When do other runs see a note an agent writes?" in page
    assert 'id="policy-open" name="policy" value="open" checked' in page

    url = reverse("dashboard:memory-policy", args=[SLUG])
    answer = manager_client.post(url, {"policy": "hold"}, follow=True)
    assert _setting(world).review_policy == "hold"
    assert "notes now wait for a person" in answer.content.decode()
    assert AuditEvent.objects.get(action="memory.policy").details["to"] == "hold"
    page = manager_client.get(reverse("dashboard:settings", args=[SLUG])).content.decode()
    assert 'id="policy-hold" name="policy" value="hold" checked' in page

    # A member reads the policy but cannot change it; a bad value changes nothing.
    page = member_client.get(reverse("dashboard:settings", args=[SLUG])).content.decode()
    assert "<fieldset disabled>" in page and "Only a project manager changes" in page
    member_client.post(url, {"policy": "open"})
    assert _setting(world).review_policy == "hold"
    manager_client.post(url, {"policy": "sometimes"})
    assert _setting(world).review_policy == "hold"


def test_a_manager_trusts_an_agent_on_its_page(world, manager_client, member_client):
    agent_url = reverse("dashboard:agent", args=[SLUG, world.agent.pk])
    page = manager_client.get(agent_url).content.decode()
    assert "Not trusted." in page and f"Trust {world.agent.name}" in page
    trust = reverse("dashboard:agent-change", args=[SLUG, world.agent.pk, "trust"])
    member_client.post(trust)
    assert not Agent.objects.get(pk=world.agent.pk).trusted
    answer = manager_client.post(trust, follow=True).content.decode()
    assert Agent.objects.get(pk=world.agent.pk).trusted
    assert "is trusted: its notes reach other runs at once" in answer
    listed = manager_client.get(reverse("dashboard:agents", args=[SLUG])).content.decode()
    assert listed.count(">trusted</span>") == 1
    untrust = reverse("dashboard:agent-change", args=[SLUG, world.agent.pk, "untrust"])
    manager_client.post(untrust)
    assert not Agent.objects.get(pk=world.agent.pk).trusted
    assert [e.details["to"] for e in AuditEvent.objects.filter(action="agent.trust")] == [
        False,
        True,
    ]  # newest first


def test_under_hold_the_queue_and_overview_show_what_waits(world, manager_client):
    held = write_note(world, "Held until someone approves it")
    trusted_run = world.run2
    services.agent_change(actor=world.as_manager, agent=world.agent2, trusted=True)
    services.note_write(
        actor=Actor.agent_run(trusted_run), kind="fact", content="A trusted agent's note"
    )
    queue = manager_client.get(reverse("dashboard:review", args=[SLUG])).content.decode()
    assert "held-summary" not in queue and "Held ·" not in queue  # open: nothing held
    services.memory_policy_set(actor=world.as_manager, project=world.project, policy="hold")
    queue = manager_client.get(reverse("dashboard:review", args=[SLUG])).content.decode()
    assert "<strong>1 note held</strong> from other runs until approved" in queue
    row = queue[queue.index(f'id="note-{held.pk}"') :]
    assert "Held · 0 min" in row[: row.index("</tr>")]
    assert queue.count("Held ·") == 1
    overview = manager_client.get(reverse("dashboard:overview", args=[SLUG])).content.decode()
    assert "Held for review" in overview and "<strong>1 note</strong></a> waits" in overview
    services.note_approve(actor=world.as_manager, note_id=held.pk)
    queue = manager_client.get(reverse("dashboard:review", args=[SLUG])).content.decode()
    assert "No note is held" in queue
