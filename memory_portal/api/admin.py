"""`/api/admin`: project memory management for managers (SPEC §3.3, the admin routes of the
project-memory source) and what an orchestrator needs: projects, members, applications,
repositories and links, agents, runs and their tokens. User tokens only."""

from __future__ import annotations

from ninja import Query, Router, Schema
from ninja.responses import Status
from pydantic import Field

from memory_portal.failures import json_error
from memory_portal.memory import selectors, services
from memory_portal.memory.access import require_manager
from memory_portal.memory.errors import MemoryPortalError, invalid
from memory_portal.memory.services.revert import run_revert_latest
from memory_portal.memory.validation import SLUG_MAX, SLUG_PATTERN

from . import schemas as s
from .auth import person
from .schemas import responses
from .schemas.filters import NoteQuery, RunQuery, filter_data

router = Router(tags=["admin"])


def _project(request, project_id: str):
    actor = person(request)
    return actor, selectors.project_get(actor=actor, slug=project_id)


def _managed(request, project_id: str):
    actor, project = _project(request, project_id)
    require_manager(actor, project)
    return actor, project


def _run(request, project_id: str, run_id: str, *, managed: bool = False):
    actor, project = (_managed if managed else _project)(request, project_id)
    return actor, selectors.run_in_project(actor=actor, project=project, run_id=run_id)


class PageQuery(Schema):
    limit: int = Field(20, ge=1, le=100)
    offset: int = Field(0, ge=0, le=s.OFFSET_MAX)


# --- Project memory ---------------------------------------------------------------------------


@router.get("/projects/{project_id}/memory", response=responses({200: s.AdminMemoryOut}))
def memory_page(request, project_id: str, page: Query[PageQuery], filters: Query[NoteQuery]):
    """Settings and a page of the project's notes, newest first, including trust, deletion
    state and provenance. The filters are the dashboard's notes table's, under the same names
    (`?status=active&trust=learned` lists what the review queue's first section counts)."""
    actor, project = _managed(request, project_id)
    setting = selectors.setting_get(project=project)
    notes = selectors.notes_admin(actor=actor, project=project)
    qs = selectors.NoteFilter(filter_data(filters), queryset=notes, project=project).checked_qs()
    rows = list(qs[page.offset : page.offset + page.limit + 1])
    more = len(rows) > page.limit
    return {
        "projectId": project.slug,
        "setting": setting,
        "counts": selectors.project_counts(project=project),
        "notes": rows[: page.limit],
        "limit": page.limit,
        "offset": page.offset,
        "nextOffset": page.offset + page.limit if more else None,
    }


def _reads_page(reads, page: PageQuery) -> dict:
    """A read list's page as the routes answer it (the dashboard's pager, selectors.reads_page)."""
    listed = selectors.reads_page(reads, offset=page.offset, size=page.limit)
    return {
        "limit": page.limit,
        "offset": listed.offset,
        "nextOffset": listed.next_offset,
        "reads": listed.rows,
    }


@router.get(
    "/projects/{project_id}/memory/{note_id}/reads", response=responses({200: s.NoteReadsOut})
)
def note_reads(request, project_id: str, note_id: str, page: Query[PageQuery]):
    """Who read a note (managers): each run it was served to, newest first, with the tool, its
    rank and score and the note's trust then; and its reach — distinct runs, agents and the
    runs still running (of its newest REACH_SAMPLE reads), an orchestrator's list of what to run
    again after a veto."""
    actor, project = _managed(request, project_id)
    reads = selectors.note_reads(actor=actor, project=project, note_id=note_id)
    reach = selectors.note_reach(note_id=note_id)
    return {"noteId": note_id, **reach.as_data(), **_reads_page(reads, page)}


@router.get("/projects/{project_id}/runs/{run_id}/reads", response=responses({200: s.RunReadsOut}))
def run_reads(request, project_id: str, run_id: str, page: Query[PageQuery]):
    """What a run read (managers), newest first: each note with its trust when read and as it
    is now, flagged in `changedSince` when it has since been vetoed, rejected, forgotten or
    superseded."""
    actor, project = _managed(request, project_id)
    reads = selectors.run_reads(actor=actor, project=project, run_id=run_id)
    return {"runId": run_id, **_reads_page(reads, page)}


@router.put("/projects/{project_id}/memory", response=responses({204: None}))
def memory_switch(request, project_id: str, body: s.EnabledIn):
    """Enable or disable memory for the project, and / or set its review policy (`open`, or
    `hold`: an agent's learned note is served only to its own top-level run until a person
    reviews it). Each is its own audited change."""
    actor, project = _project(request, project_id)
    if body.enabled is None and body.reviewPolicy is None:
        raise invalid("enabled", "Send enabled, reviewPolicy or both.")
    if body.enabled is True:
        services.memory_enable(actor=actor, project=project)
    elif body.enabled is False:
        services.memory_disable(actor=actor, project=project)
    if body.reviewPolicy is not None:
        services.memory_policy_set(actor=actor, project=project, policy=body.reviewPolicy)
    return Status(204, None)


@router.delete("/projects/{project_id}/memory", response=responses({204: None}))
def memory_reset(request, project_id: str):
    """Irreversible reset: every note, recovery record and scratchpad item goes."""
    actor, project = _project(request, project_id)
    services.memory_reset(actor=actor, project=project)
    return Status(204, None)


@router.patch("/projects/{project_id}/memory/{note_id}", response=responses({204: None}))
def memory_review(request, project_id: str, note_id: str, body: s.StateIn):
    """Mark a note reviewed (`approved`) or `rejected` (with an optional one-line `reason`),
    or take that back (`learned`: it awaits review again)."""
    actor, project = _project(request, project_id)
    if body.state == "rejected":
        services.note_reject(actor=actor, note_id=note_id, project=project, reason=body.reason)
    elif body.reason:
        raise invalid("reason", "A reason goes with a rejection only.")
    else:
        verb = {"approved": "approve", "learned": "unreview"}[body.state]
        services.NOTE_VERBS[verb](actor=actor, note_id=note_id, project=project)
    return Status(204, None)


@router.post(
    "/projects/{project_id}/memory/recoveries/{recovery_id}/restore",
    response=responses({200: s.IdOut}),
)
def memory_restore(request, project_id: str, recovery_id: str):
    actor, project = _project(request, project_id)
    selectors.recovery_in_project(actor=actor, project=project, recovery_id=recovery_id)
    note = services.note_restore(actor=actor, recovery_id=recovery_id)
    return {"id": note.id}


def _note_verb(verb: str, out, doc: str | None):
    """`POST …/memory/{note_id}/<verb>`: the verb's service's answer for the note
    (services.NOTE_VERBS), as `out`."""
    service = services.NOTE_VERBS[verb]

    def view(request, project_id: str, note_id: str):
        actor, project = _project(request, project_id)
        return service(actor=actor, note_id=note_id, project=project)

    view.__name__ = view.__qualname__ = f"memory_{verb}"
    view.__doc__ = doc
    path = f"/projects/{{project_id}}/memory/{{note_id}}/{verb}"
    return router.post(path, response=responses({200: out}))(view)


# The note verbs of the admin API (the restore is by recovery id, above).
memory_forget = _note_verb("forget", s.ForgetOut, None)


@router.post(
    "/projects/{project_id}/memory/{note_id}/veto", response=responses({200: s.NoteStateOut})
)
def memory_veto(request, project_id: str, note_id: str, body: s.ReasonIn | None = None):
    """Veto: archive the note with reason `vetoed`, recording who and, when given, why
    (`reason`, one line: the note's `reviewReason`)."""
    actor, project = _project(request, project_id)
    reason = body.reason if body else None
    return services.note_veto(actor=actor, note_id=note_id, project=project, reason=reason)
memory_undo = _note_verb("undo", s.NoteStateOut, "Undo a veto (or another archive).")


# --- Orchestration ----------------------------------------------------------------------------


@router.post("/projects", response=responses({201: s.IdOut}))
def project_create(request, body: s.ProjectIn):
    actor = person(request)
    project = services.project_create(actor=actor, slug=body.id, name=body.name)
    return Status(201, {"id": project.slug})


@router.post("/projects/{project_id}/members", response=responses({200: s.MemberOut}))
def member_set(request, project_id: str, body: s.MemberIn):
    actor, project = _project(request, project_id)
    user = selectors.user_active_get(username=body.username, field="username")
    membership = services.membership_set(actor=actor, project=project, user=user, role=body.role)
    return {"username": user.get_username(), "role": membership.role}


@router.get("/people", response=responses({200: s.PeopleOut}))
def people_list(request):
    """Every person of the server (administrators): username, email, active, administrator,
    how many projects."""
    return {"people": list(selectors.people_overview(actor=person(request)))}


@router.patch("/people/{username}", response=responses({200: s.PersonOut}))
def person_patch(request, username: str, body: s.PersonIn):
    """Switch a person off or on (`active`: off, they sign in no more and their API tokens stop
    at once) or make or unmake an administrator (administrators; never oneself: 403
    `memory_forbidden`)."""
    actor = person(request)
    user = selectors.person_get(actor=actor, username=username)
    changed = services.person_change(
        actor=actor, user=user, active=body.active, administrator=body.administrator
    )
    return selectors.people_overview(actor=actor).get(pk=changed.pk)


@router.get("/projects/{project_id}/members", response=responses({200: s.MemberListOut}))
def member_list(request, project_id: str):
    """The project's members and their roles, managers first (any member reads them)."""
    actor, project = _project(request, project_id)
    members = selectors.project_members(actor=actor, project=project)
    return {"members": [{"username": m.user.get_username(), "role": m.role} for m in members]}


@router.delete(
    "/projects/{project_id}/members/{username}", response=responses({204: None})
)
def member_remove(request, project_id: str, username: str):
    """Take a person out of the project (managers); never its last manager (409
    `project_last_manager`)."""
    actor, project = _project(request, project_id)
    user = selectors.user_active_get(username=username, field="username")
    services.membership_remove(actor=actor, project=project, user=user)
    return Status(204, None)


@router.post("/projects/{project_id}/applications", response=responses({201: s.IdOut}))
def application_create(request, project_id: str, body: s.ApplicationIn):
    actor, project = _project(request, project_id)
    application = services.application_create(
        actor=actor, project=project, slug=body.id, name=body.name
    )
    return Status(201, {"id": application.slug})


# Deletes are irreversible, so they take the id a second time (`?confirm=`): a mistyped URL or
# a generated request does not delete anything.
CONFIRM_PROJECT = "The project id again, to confirm the delete."
CONFIRM_APPLICATION = "The application id again, to confirm the delete."


def _camel(counts: dict) -> dict:
    return {
        "".join(w if i == 0 else w.title() for i, w in enumerate(key.split("_"))): value
        for key, value in counts.items()
    }


@router.delete("/projects/{project_id}", response=responses({200: s.ProjectDeleteOut}))
def project_delete(
    request, project_id: str, confirm: str = Query(..., description=CONFIRM_PROJECT)
):
    """Delete the project and everything in it — notes, recovery records, scratchpads,
    applications, agents, runs and their tokens, memberships. Administrators only;
    irreversible. The audit event outlives it. (`DELETE …/memory` is the reset, which keeps
    the project.)"""
    actor, project = _project(request, project_id)
    counts = services.project_delete(actor=actor, project=project, confirm=confirm)
    return {"projectId": project_id, **_camel(counts)}


@router.delete(
    "/projects/{project_id}/applications/{application_id}",
    response=responses({200: s.ApplicationDeleteOut}),
)
def application_delete(
    request,
    project_id: str,
    application_id: str,
    confirm: str = Query(..., description=CONFIRM_APPLICATION),
):
    """Delete an application (managers): the notes scoped to it, their recovery records and
    its repository links go; its agents and runs are detached and stay, with their private
    facts."""
    actor, project = _project(request, project_id)
    application = selectors.application_in_project(
        actor=actor, project=project, slug=application_id
    )
    counts = services.application_delete(actor=actor, application=application, confirm=confirm)
    return {"projectId": project.slug, "applicationId": application_id, **_camel(counts)}


@router.post("/repositories", response=responses({201: s.IdOut}))
def repository_create(request, body: s.RepositoryIn):
    actor = person(request)
    repository = services.repository_create(actor=actor, slug=body.id, path=body.path)
    return Status(201, {"id": repository.slug})


@router.put(
    "/projects/{project_id}/applications/{application_id}/repositories/{repository_id}",
    response=responses({200: s.LinkOut}),
)
def repository_link(
    request, project_id: str, application_id: str, repository_id: str, body: s.LinkIn
):
    """Link a repository to an application at a revision, or re-pin it."""
    actor, project = _project(request, project_id)
    application = selectors.application_in_project(
        actor=actor, project=project, slug=application_id, field="applicationId"
    )
    repository = selectors.repository_get(slug=repository_id, field="repositoryId")
    link = services.repository_link_set(
        actor=actor, application=application, repository=repository, revision=body.revision
    )
    return {
        "applicationId": application.slug,
        "repositoryId": repository.slug,
        "revision": link.revision,
    }


@router.post("/projects/{project_id}/agents", response=responses({201: s.IdOut}))
def agent_create(request, project_id: str, body: s.AgentIn):
    actor, project = _project(request, project_id)
    application = None
    if body.applicationId:
        application = selectors.application_in_project(
            actor=actor, project=project, slug=body.applicationId, field="applicationId"
        )
    agent = services.agent_create(
        actor=actor, project=project, name=body.name, stage=body.stage, application=application
    )
    return Status(201, {"id": agent.id})


def _agent(request, project_id: str, agent_id: str):
    actor, project = _project(request, project_id)
    return actor, selectors.agent_in_project(actor=actor, project=project, agent_id=agent_id)


@router.patch("/projects/{project_id}/agents/{agent_id}", response=responses({204: None}))
def agent_change(request, project_id: str, agent_id: str, body: s.AgentPatchIn):
    """Rename an agent, change its stage and / or trust it (managers): a trusted agent's notes
    are served to other runs at once under the `hold` review policy."""
    actor, agent = _agent(request, project_id, agent_id)
    services.agent_change(
        actor=actor, agent=agent, name=body.name, stage=body.stage, trusted=body.trusted
    )
    return Status(204, None)


@router.post("/projects/{project_id}/agents/{agent_id}/retire", response=responses({204: None}))
def agent_retire(request, project_id: str, agent_id: str):
    """Retire an agent (managers): its keys stop working at once and it starts no runs; its
    notes and runs stay."""
    actor, agent = _agent(request, project_id, agent_id)
    services.agent_retire(actor=actor, agent=agent)
    return Status(204, None)


@router.post("/projects/{project_id}/agents/{agent_id}/keys", response=responses({201: s.KeyOut}))
def key_create(request, project_id: str, agent_id: str, body: s.KeyIn):
    """Create an agent key (managers). `key` is shown this once: it is stored hashed. A key
    only starts runs: `POST /api/runs`, or as the bearer token of `/mcp`."""
    actor, agent = _agent(request, project_id, agent_id)
    key, plaintext = services.key_create(actor=actor, agent=agent, label=body.label)
    return Status(
        201,
        {
            "id": key.pk,
            "key": plaintext,
            "label": key.label,
            "agentId": agent.pk,
            "createdAt": key.created_at,
        },
    )


@router.get(
    "/projects/{project_id}/agents/{agent_id}/keys", response=responses({200: s.KeyListOut})
)
def key_list(request, project_id: str, agent_id: str):
    """The agent's keys, newest first, without their secrets (managers)."""
    actor, agent = _agent(request, project_id, agent_id)
    require_manager(actor, agent.project)
    return {"keys": list(selectors.agent_keys(actor=actor, agent=agent))}


@router.delete(
    "/projects/{project_id}/agents/{agent_id}/keys/{key_id}", response=responses({204: None})
)
def key_revoke(request, project_id: str, agent_id: str, key_id: str):
    """Revoke a key at once (managers): it starts no more runs or MCP sessions."""
    actor, agent = _agent(request, project_id, agent_id)
    key = selectors.agent_key_get(actor=actor, agent=agent, key_id=key_id)
    services.key_revoke(actor=actor, key=key)
    return Status(204, None)


@router.get("/projects/{project_id}/runs", response=responses({200: s.RunListOut}))
def run_list(
    request, project_id: str, filters: Query[RunQuery], page: Query[PageQuery]
):
    """The project's runs, newest first, by the Runs tab's filters: `agent` (an `agt_` id),
    `status`, `task_key` (any case), `started_from` / `started_to` (dates)."""
    actor, project = _project(request, project_id)
    runs = selectors.runs_for_project(actor=actor, project=project)
    qs = selectors.RunFilter(filter_data(filters), queryset=runs, project=project).checked_qs()
    rows = list(qs[page.offset : page.offset + page.limit + 1])
    more = len(rows) > page.limit
    return {
        "runs": rows[: page.limit],
        "limit": page.limit,
        "offset": page.offset,
        "nextOffset": page.offset + page.limit if more else None,
    }


@router.post("/projects/{project_id}/runs", response=responses({201: s.RunOut}))
def run_create(request, project_id: str, body: s.RunIn):
    """Start a run and mint its token (shown once, never again)."""
    actor, project = _managed(request, project_id)
    agent = selectors.agent_in_project(
        actor=actor, project=project, agent_id=body.agentId, field="agentId"
    )
    parent = None
    if body.parentRunId:
        parent = selectors.run_in_project(actor=actor, project=project, run_id=body.parentRunId)
    scopes = body.scopes or ["read", "write"]
    run, plaintext = services.run_start(
        actor=actor,
        agent=agent,
        parent=parent,
        task_key=body.taskKey or "",
        task_title=body.task.title if body.task else "",
        task_description=(body.task.description or "") if body.task else "",
        can_write="write" in scopes,
    )
    return Status(
        201,
        {
            "id": run.id,
            "token": plaintext,
            "topLevelRunId": run.top_level_run_id,
            "scopes": ["read", "write"] if "write" in scopes else ["read"],
        },
    )


@router.patch("/projects/{project_id}/runs/{run_id}", response=responses({204: None}))
def run_status(request, project_id: str, run_id: str, body: s.RunStatusIn):
    """Report a run's status and / or current step. Once it leaves `running` the run has
    finished: its token stops working at once (401 `auth_invalid`)."""
    actor, run = _run(request, project_id, run_id)
    services.run_update(actor=actor, run=run, status=body.status, step=body.step)
    return Status(204, None)


@router.delete("/projects/{project_id}/runs/{run_id}", response=responses({204: None}))
def run_delete(request, project_id: str, run_id: str):
    """Delete a run: its scratchpad goes; notes keep their provenance as text."""
    actor, run = _run(request, project_id, run_id)
    services.run_delete(actor=actor, run=run)
    return Status(204, None)


# --- Run revert -------------------------------------------------------------------------------


def _revert_note(note, **extra) -> dict:
    return {**s.RevertNoteOut.from_orm(note).model_dump(), **extra}


@router.post("/projects/{project_id}/runs/{run_id}/revert", response=responses({200: s.RevertOut}))
def run_revert(request, project_id: str, run_id: str, body: s.RevertIn):
    """Revert what a run and its nested runs wrote (managers). `dryRun: true` answers the
    impact preview and changes nothing; otherwise the revert is applied in one transaction and
    answered with its `revertId` and counts. Above 20 changes `confirm` must be the run id."""
    actor, run = _run(request, project_id, run_id, managed=True)
    plan, revert = services.run_revert(
        actor=actor,
        run=run,
        dry_run=body.dryRun,
        include_reviewed=body.includeReviewed,
        confirm=body.confirm,
    )
    selected = set(plan.selected_reviewed)
    return {
        "runId": run.pk,
        "runIds": plan.run_ids,
        "dryRun": body.dryRun,
        "revertId": revert.pk if revert else None,
        "forget": plan.forget,
        "veto": plan.veto,
        "dayRows": plan.day_rows,
        "reviewed": [_revert_note(n, selected=n.pk in selected) for n in plan.reviewed],
        "bringBack": [_revert_note(n, why=why) for n, why in plan.bring_back],
        "kept": [_revert_note(k.note, reason=k.reason) for k in plan.kept],
        "changes": plan.changes,
        "confirmRequired": plan.confirm_required,
        "counts": _camel(plan.counts()),
    }


@router.post(
    "/projects/{project_id}/runs/{run_id}/revert/undo",
    response=responses({200: s.RevertUndoOut}),
)
def run_revert_undo(request, project_id: str, run_id: str):
    """Undo the run's latest revert: exactly what it changed comes back, while the recovery
    records exist; notes changed since are left alone and listed under `skipped`."""
    actor, run = _run(request, project_id, run_id, managed=True)
    revert = run_revert_latest(run=run)
    if revert is None:
        raise MemoryPortalError(
            "not_found",
            f"Run {run.pk} has no revert to undo.",
            hint="Revert the run first; an undone revert cannot be undone twice.",
        )
    result = services.run_revert_undo(actor=actor, revert_id=revert.pk)
    return {
        "revertId": revert.pk,
        "runId": run.pk,
        "restored": result.restored,
        "skipped": result.skipped,
    }


# --- Export -----------------------------------------------------------------------------------


@router.get("/projects/{project_id}/export", response=responses({200: None}))
def project_export(request, project_id: str):
    """The project's memory as NDJSON (`application/x-ndjson`), streamed: a versioned header,
    the setting, applications, agents, notes of every status, recovery records, the notes'
    audit history, and an end line with the counts. Never secrets or tokens. Managers. A
    database failure before the first byte is a 503 with Retry-After; one after it ends the
    body with an `error` line and aborts the connection (no end line: the file is incomplete
    and an import refuses it)."""
    from django.http import StreamingHttpResponse

    from memory_portal.memory.portability import project_export as export_lines

    actor, project = _managed(request, project_id)
    response = StreamingHttpResponse(
        export_lines(actor=actor, project=project), content_type="application/x-ndjson"
    )
    response["Content-Disposition"] = f'attachment; filename="{project.slug}.jsonl"'
    return response


# --- Import -----------------------------------------------------------------------------------


class ImportQuery(Schema):
    project: str | None = Field(
        None,
        min_length=1,
        max_length=SLUG_MAX,
        pattern=SLUG_PATTERN,
        description="import into this project instead of the one the file names (ids remapped)",
    )
    dryRun: bool = Field(
        False,
        description="check the whole file and answer what the import would do (the members "
        "it would add among it), writing nothing",
    )
    grantMembers: bool = Field(
        False,
        description="confirm the members the file adds to the project it creates (the dry "
        "run lists them); without it such an import is refused. Member lines never change "
        "an existing project's members.",
    )


@router.post("/import", response=responses({200: s.ImportOut}), url_name="admin-import")
def project_import(request, params: Query[ImportQuery]):
    """Import a project's memory from an export: the NDJSON file as the request body
    (`application/x-ndjson`, up to MEMORY_PORTAL_IMPORT_MAX_BYTES, 32 MB by default). The whole
    file is checked first — a 400 lists every bad line and nothing is written; the check
    itself is bounded (lines, nesting, seconds: 400 `import_limit`); caps and the secret scan
    apply; importing the same file twice changes nothing. Into a project the import creates,
    the file's member lines give their roles only when confirmed (`grantMembers=true`, after a
    `dryRun=true` that lists them; else 400 `import_members_unconfirmed`); into an existing
    project they are never applied. Superusers."""
    from memory_portal.memory.portability import ImportInvalid, ImportJob, decoded_lines

    actor = person(request)
    try:
        lines = decoded_lines(request)  # the body, line by line, unparsed
        job = ImportJob(
            actor=actor,
            lines=lines,
            project_slug=params.project,
            grant_members=params.grantMembers,
        )
    except ImportInvalid as exc:
        problems = [{"line": number, "message": message} for number, message in exc.shown()]
        return json_error(exc.refusal(), lines=problems)
    exists = job.project_exists()
    members = [
        {"username": m.username, "role": m.role, "account": m.account}
        for m in ([] if exists else job.members())
    ]
    if params.dryRun:
        return {
            "project": job.slug,
            "createdProject": not exists,
            "remapped": job.remap,
            "dryRun": True,
            "lines": job.lines_by_type(),
            "members": members,
        }
    report = job.run()
    return {
        "project": report.project,
        "createdProject": report.created_project,
        "remapped": report.remapped,
        "inserted": report.counts,
        "unchanged": report.unchanged,
        "members": [
            {"username": name, "role": role, "account": True} for name, role in report.members
        ],
    }


# --- Webhooks ---------------------------------------------------------------------------------


def _webhook_out(webhook) -> dict:
    from memory_portal.memory.webhooks import masked

    return {
        "id": webhook.pk,
        "url": masked(webhook.url),
        "eventTypes": webhook.event_types,
        "description": webhook.description,
        "format": webhook.format,
        "active": webhook.active,
        "failingSince": webhook.failing_since,
        "disabledReason": webhook.disabled_reason,
        "createdAt": webhook.created_at,
    }


def _webhook(request, project_id: str, webhook_id: str):
    actor, project = _managed(request, project_id)
    return actor, selectors.webhook_in_project(actor=actor, project=project, webhook_id=webhook_id)


@router.post("/projects/{project_id}/webhooks", response=responses({201: s.WebhookCreatedOut}))
def webhook_create(request, project_id: str, body: s.WebhookIn):
    """Add a webhook endpoint (managers; at most 20 a project). It receives the project's
    events of `eventTypes` from now on, at least once, signed the Standard Webhooks way with
    the `secret` answered here once (or as a chat message, `format: chat`)."""
    actor, project = _project(request, project_id)
    webhook, secret = services.webhook_create(
        actor=actor,
        project=project,
        url=body.url,
        event_types=body.eventTypes,
        description=body.description,
        format=body.format,
        active=body.active,
    )
    return Status(201, {**_webhook_out(webhook), "url": webhook.url, "secret": secret})


@router.get("/projects/{project_id}/webhooks", response=responses({200: s.WebhookListOut}))
def webhook_list(request, project_id: str):
    """The project's endpoints, their URLs masked, never their secrets (managers)."""
    actor, project = _managed(request, project_id)
    webhooks = selectors.webhooks_of(actor=actor, project=project)
    return {"webhooks": [_webhook_out(w) for w in webhooks]}


@router.get(
    "/projects/{project_id}/webhooks/{webhook_id}", response=responses({200: s.WebhookOut})
)
def webhook_get(request, project_id: str, webhook_id: str):
    _actor, webhook = _webhook(request, project_id, webhook_id)
    return _webhook_out(webhook)


@router.patch(
    "/projects/{project_id}/webhooks/{webhook_id}", response=responses({200: s.WebhookOut})
)
def webhook_change(request, project_id: str, webhook_id: str, body: s.WebhookPatchIn):
    """Change an endpoint; `active: false` pauses it (events while it is off are not sent)."""
    actor, webhook = _webhook(request, project_id, webhook_id)
    webhook = services.webhook_change(
        actor=actor,
        webhook=webhook,
        url=body.url,
        event_types=body.eventTypes,
        description=body.description,
        format=body.format,
        active=body.active,
    )
    return _webhook_out(webhook)


@router.delete(
    "/projects/{project_id}/webhooks/{webhook_id}", response=responses({204: None})
)
def webhook_delete(request, project_id: str, webhook_id: str):
    actor, webhook = _webhook(request, project_id, webhook_id)
    services.webhook_delete(actor=actor, webhook=webhook)
    return Status(204, None)


@router.post(
    "/projects/{project_id}/webhooks/{webhook_id}/rotate", response=responses({200: s.SecretOut})
)
def webhook_rotate(request, project_id: str, webhook_id: str):
    """A new signing secret, answered once; the old one stops signing at once."""
    actor, webhook = _webhook(request, project_id, webhook_id)
    return {"secret": services.webhook_rotate(actor=actor, webhook=webhook)}


@router.post(
    "/projects/{project_id}/webhooks/{webhook_id}/test", response=responses({200: s.DeliveryOut})
)
def webhook_test(request, project_id: str, webhook_id: str):
    """Send a test event (`webhook.test`) now; the answer is how it went."""
    actor, webhook = _webhook(request, project_id, webhook_id)
    return _delivery_out(services.webhook_test(actor=actor, webhook=webhook))


@router.get(
    "/projects/{project_id}/webhooks/{webhook_id}/deliveries",
    response=responses({200: s.DeliveryListOut}),
)
def webhook_deliveries(request, project_id: str, webhook_id: str):
    """The endpoint's last 50 deliveries, newest first."""
    actor, webhook = _webhook(request, project_id, webhook_id)
    rows = selectors.webhook_deliveries(actor=actor, webhook=webhook)
    return {"deliveries": [_delivery_out(d) for d in rows]}


@router.post(
    "/projects/{project_id}/webhooks/{webhook_id}/deliveries/{delivery_id}/retry",
    response=responses({200: s.DeliveryOut}),
)
def delivery_retry(request, project_id: str, webhook_id: str, delivery_id: int):
    """Send a delivery again at the next pass (soon)."""
    actor, webhook = _webhook(request, project_id, webhook_id)
    delivery = selectors.delivery_of(actor=actor, webhook=webhook, delivery_id=delivery_id)
    return _delivery_out(services.delivery_retry(actor=actor, delivery=delivery))


def _delivery_out(delivery) -> dict:
    event = delivery.event
    return {
        "id": delivery.pk,
        "eventNumber": event.number if event is not None else None,
        "type": event.type if event is not None else "webhook.test",
        "status": delivery.status,
        "attempts": delivery.attempts,
        "lastStatus": delivery.last_status,
        "lastMs": delivery.last_ms,
        "lastError": delivery.last_error,
        "nextAttemptAt": delivery.next_attempt_at,
        "createdAt": delivery.created_at,
    }
