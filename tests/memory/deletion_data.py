"""Data for the delete tests: a project with every shape a delete touches, written through
the services, and the row snapshots that tell what a delete removed and what it left alone."""

from __future__ import annotations

from dataclasses import dataclass

from memory_portal.memory import services
from memory_portal.memory.models import (
    Agent,
    ApiToken,
    Application,
    AuditEvent,
    Event,
    Membership,
    MemorySetting,
    Note,
    Recovery,
    Repository,
    RepositoryLink,
    ReviewRoutine,
    ReviewRun,
    Run,
    ScratchpadItem,
    StartRecall,
    ToolCallCount,
)

# The audit detail key of each table a delete may remove rows from.
TABLES = {
    "notes": Note,
    "recoveries": Recovery,
    "scratchpad_items": ScratchpadItem,
    "applications": Application,
    "repository_links": RepositoryLink,
    "agents": Agent,
    "runs": Run,
    "tokens": ApiToken,
    "memberships": Membership,
    "review_routines": ReviewRoutine,
    "review_runs": ReviewRun,
    "tool_call_counts": ToolCallCount,
    "start_recalls": StartRecall,
    "events": Event,
}


def table_counts() -> dict[str, int]:
    return {key: model.objects.count() for key, model in TABLES.items()}


def removed(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {key: before[key] - after[key] for key in before}


@dataclass
class Populated:
    storefront_notes: list[Note]  # scoped to world.app: active, archived, forgotten, edited
    edited: Note  # the edit of storefront_notes[3], which it superseded
    shared: Note  # project scope, written by the storefront agent
    billing: Note  # scoped to world.other_app
    fact: Note  # the storefront agent's private fact
    day: Note  # its day log
    run_token: str


def populate(world, repo_path: str) -> Populated:
    """Notes in every state scoped to `world.app`, plus what must survive its delete: shared
    notes, another application's notes, the agent's private facts, day log and daily review,
    scratchpad items, the call trace, tokens and repository links."""
    storefront = [
        services.note_write(
            actor=world.as_agent, kind="fact", content=f"Storefront fact {i}", scope="application"
        ).note
        for i in range(4)
    ]
    services.note_archive(actor=world.as_member, note_id=storefront[1].pk, reason="outdated")
    services.note_forget(actor=world.as_manager, note_id=storefront[2].pk)
    edited = services.note_edit(
        actor=world.as_member, note_id=storefront[3].pk, content="Storefront fact 3, corrected"
    ).note
    shared = services.note_write(actor=world.as_agent, kind="lesson", content="Shared lesson").note
    forgotten_shared = services.note_write(
        actor=world.as_agent, kind="fact", content="Shared and forgotten"
    ).note
    services.note_forget(actor=world.as_manager, note_id=forgotten_shared.pk)
    billing = services.note_write(
        actor=world.as_agent2, kind="fact", content="Billing fact", scope="application"
    ).note
    fact = services.fact_save(actor=world.as_agent, text="Runtime helper's own fact").note
    day = services.day_append(actor=world.as_agent, line="checked the storefront")
    services.scratchpad_add(actor=world.as_agent, text="Compare totals")
    services.tool_call_record(run=world.run, tool="write", outcome="ok")
    repository = Repository.objects.filter(slug="legacy-main").first()
    if repository is None:
        repository = services.repository_create(actor=None, slug="legacy-main", path=repo_path)
    for application in (world.app, world.other_app):
        services.repository_link_set(
            actor=None, application=application, repository=repository, revision="HEAD"
        )
    StartRecall.objects.create(  # a start recall's mark (recall itself is tested elsewhere)
        top_level_run_id=world.run.top_level_run_id,
        agent_id=world.agent.pk,
        recalled_at=day.created_at,
    )
    run_token = services.token_create(actor=None, run=world.run)[1]
    return Populated(storefront, edited, shared, billing, fact, day, run_token)


def rows(project) -> dict:
    """Every row of a project, as comparable values: equal before and after means untouched."""
    agent_ids = list(Agent.objects.filter(project=project).values_list("pk", flat=True))
    return {
        "setting": list(
            MemorySetting.objects.filter(project=project).values_list(
                "enabled", "revision", "revocation_epoch"
            )
        ),
        "applications": sorted(
            Application.objects.filter(project=project).values_list("pk", "slug", "name")
        ),
        "links": sorted(
            RepositoryLink.objects.filter(application__project=project).values_list(
                "pk", "application_id", "repository_id", "revision"
            )
        ),
        "agents": sorted(
            Agent.objects.filter(project=project).values_list("pk", "application_id", "name")
        ),
        "runs": sorted(
            Run.objects.filter(project=project).values_list("pk", "application_id", "status")
        ),
        "tokens": sorted(
            ApiToken.objects.filter(run__project=project).values_list("pk", "revoked_at")
        ),
        "notes": sorted(
            Note.objects.filter(project=project).values_list(
                "pk",
                "status",
                "trust",
                "application_id",
                "supersedes_id",
                "superseded_by_id",
                "updated_at",
            )
        ),
        "recoveries": sorted(Recovery.objects.filter(project=project).values_list("pk", "note_id")),
        "scratchpad": sorted(
            ScratchpadItem.objects.filter(project=project).values_list("pk", "done")
        ),
        "memberships": sorted(
            Membership.objects.filter(project=project).values_list("pk", "user_id", "role")
        ),
        "routines": sorted(
            ReviewRoutine.objects.filter(agent__project=project).values_list("pk", "agent_id")
        ),
        "tool_calls": sorted(
            ToolCallCount.objects.filter(run__project=project).values_list("pk", "count")
        ),
        "start_recalls": sorted(
            StartRecall.objects.filter(agent_id__in=agent_ids).values_list("pk", "agent_id")
        ),
        "audit": sorted(AuditEvent.objects.filter(project=project).values_list("pk", "action")),
    }
