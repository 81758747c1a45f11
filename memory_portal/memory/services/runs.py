"""Context services: projects, applications, repositories and their pinned links, agents,
runs, memberships and API tokens."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from .. import evidence as evidence_checks
from .. import fastsql, tokens
from ..access import (
    application_not_found,
    is_administrator,
    require_manager,
    require_member,
    require_person,
    require_writer,
)
from ..actors import Actor
from ..audit_actions import AuditAction
from ..errors import MemoryPortalError, invalid
from ..models import (
    Agent,
    ApiToken,
    Application,
    Membership,
    MemorySetting,
    Note,
    Project,
    Repository,
    RepositoryLink,
    Role,
    Run,
    RunStatus,
    ScratchpadItem,
    Stage,
    StartRecall,
    Status,
)
from ..validation import (
    PATH_MAX,
    SLUG_MAX,
    check_no_secret,
    reject_unstorable,
    require_name,
    run_task,
)
from ._common import audit, audit_event, bump, lock_setting

STEP_MAX = 100  # Note.step and Run.current_step


def _require_superuser(actor: Actor, what: str) -> None:
    if not is_administrator(actor):
        raise MemoryPortalError("memory_forbidden", f"Only an administrator can {what}.")
    require_writer(actor)


def _slug(field: str, value: object) -> str:
    from django.core.exceptions import ValidationError
    from django.core.validators import validate_slug

    if not isinstance(value, str) or not value or len(value) > SLUG_MAX:
        raise invalid(field, f"{field} must be a slug of 1–{SLUG_MAX} characters.")
    try:
        validate_slug(value)
    except ValidationError as exc:
        raise invalid(field, f"{field} may hold letters, digits, - and _ only.") from exc
    return value


def project_create(*, actor: Actor | None, slug: str, name: str) -> Project:
    """A project and its memory setting row (memory off). Administrators only; `actor=None` is
    the system (management commands)."""
    if actor is not None:
        _require_superuser(actor, "create projects")
    slug = _slug("id", slug)
    name = require_name("name", name or slug)
    if Project.objects.filter(slug=slug).exists():
        raise invalid("id", f"Project {slug} already exists.")
    with transaction.atomic():
        project = Project.objects.create(slug=slug, name=name)
        MemorySetting.objects.create(project=project)
        audit(actor=actor, action=AuditAction.PROJECT_CREATE, project=project)
    return project


# What a delete removes, by model, under the names its audit event (and the API) use.
_DELETED_NAMES = {
    "memory.Note": "notes",
    "memory.Recovery": "recoveries",
    "memory.ScratchpadItem": "scratchpad_items",
    "memory.Application": "applications",
    "memory.RepositoryLink": "repository_links",
    "memory.Agent": "agents",
    "memory.Run": "runs",
    "memory.ApiToken": "tokens",
    "memory.Membership": "memberships",
    "memory.ReviewRoutine": "review_routines",
    "memory.ReviewRun": "review_runs",
    "memory.ToolCallCount": "tool_call_counts",
}


def _require_typed_confirmation(*, what: str, slug: str, confirm: str) -> None:
    """Deleting is irreversible: every entry point (dashboard, API, command) passes what the
    person typed, and only the exact id goes ahead."""
    if confirm != slug:
        raise invalid(
            "confirm",
            f"To delete {what} {slug}, confirm with its id: {slug}.",
            hint=f"Nothing was deleted; retry with confirm set to {slug}.",
        )


def _notes_by_status(notes) -> dict[str, int]:
    counted = dict(notes.order_by().values_list("status").annotate(n=Count("pk")))
    return {status: counted.get(status, 0) for status in Status.values}


def _removed(
    deleted: dict[str, int], *, names: dict[str, str], besides: tuple[str, ...]
) -> dict[str, int]:
    """Django's own count of the rows a delete removed, by model, under `names`. A model not
    named (a cascade added later) is still counted, under its label, so the audit event never
    under-reports what went."""
    counts = {name: deleted.get(label, 0) for label, name in names.items()}
    for label, n in deleted.items():
        if label not in names and label not in besides and n:
            counts[label] = n
    return counts


def _clear_supersede_links(notes) -> None:
    """Notes about to go must not be referenced by the chain of a note that stays, nor
    reference each other while the rows are removed."""
    ids = notes.values("pk")
    notes.update(supersedes=None, superseded_by=None)
    Note.objects.filter(supersedes__in=ids).update(supersedes=None)
    Note.objects.filter(superseded_by__in=ids).update(superseded_by=None)


def project_delete(*, actor: Actor | None, project: Project, confirm: str) -> dict:
    """Delete a project with everything in it: notes, recovery records, scratchpads,
    applications and their repository links, agents, runs and their tokens, memberships,
    daily reviews and the call trace. Administrators only (`actor=None` is the system); the
    typed `confirm` must be the project id. The audit event outlives the project and counts
    exactly what went."""
    if actor is not None:
        if not is_administrator(actor):
            require_member(actor, project)  # outsiders learn nothing: not found
        _require_superuser(actor, "delete projects")
    _require_typed_confirmation(what="project", slug=project.slug, confirm=confirm)
    slug = project.slug
    with transaction.atomic():
        lock_setting(project)  # waits for in-flight writes; later ones find no project
        notes = Note.objects.filter(project=project)
        by_status = _notes_by_status(notes)
        _clear_supersede_links(notes)
        agent_ids = list(Agent.objects.filter(project=project).values_list("pk", flat=True))
        # Keyed by text, not a foreign key: the start-recall marks of the project's agents.
        start_recalls = StartRecall.objects.filter(agent_id__in=agent_ids).delete()[0]
        _, deleted = Project.objects.filter(pk=project.pk).delete()
        counts = {
            **_removed(
                deleted,
                names=_DELETED_NAMES,
                besides=("memory.Project", "memory.MemorySetting"),
            ),
            "notes_by_status": by_status,
            "start_recalls": start_recalls,
        }
        event = audit_event(
            actor=actor,
            action=AuditAction.PROJECT_DELETE,
            project=None,
            target=slug,
            details=counts,
        )
        event.project_ref = slug  # the audit log still files the event under the project
        fastsql.insert(event)
    return counts


def application_delete(*, actor: Actor | None, application: Application, confirm: str) -> dict:
    """Delete an application: the notes scoped to it go with their recovery records, and so
    do its repository links. Its agents and runs are detached, not deleted: they, their
    private facts and the project-scoped notes they wrote stay in the project. Managers (and
    administrators; `actor=None` is the system); the typed `confirm` must be the
    application id."""
    project = application.project
    if actor is not None:
        require_manager(actor, project)
    slug = application.slug
    _require_typed_confirmation(what="application", slug=slug, confirm=confirm)
    with transaction.atomic():
        setting = lock_setting(project)
        if not Application.objects.filter(pk=application.pk).exists():
            raise application_not_found(project, slug)  # someone else deleted it meanwhile
        notes = Note.objects.filter(application=application)
        by_status = _notes_by_status(notes)
        _clear_supersede_links(notes)
        agents = Agent.objects.filter(application=application).update(application=None)
        runs = Run.objects.filter(application=application).update(application=None)
        _, deleted = Application.objects.filter(pk=application.pk).delete()
        counts = {
            **_removed(
                deleted,
                names={
                    label: _DELETED_NAMES[label]
                    for label in ("memory.Note", "memory.Recovery", "memory.RepositoryLink")
                },
                besides=("memory.Application",),
            ),
            "notes_by_status": by_status,
            "agents_detached": agents,
            "runs_detached": runs,
        }
        # Agents' views change, and writes checked against the application (its scope, its
        # repository links) while it still existed must not land: revoke them.
        bump(setting, revocation_epoch=setting.revocation_epoch + 1)
        audit(
            actor=actor,
            action=AuditAction.APPLICATION_DELETE,
            project=project,
            target=slug,
            details=counts,
        )
    return counts


def membership_set(*, actor: Actor | None, project: Project, user, role: str) -> Membership:
    if actor is not None:
        require_manager(actor, project)
    if role not in Role.values:
        raise invalid("role", "role must be member or manager.")
    with transaction.atomic():
        membership, _ = Membership.objects.update_or_create(
            user=user, project=project, defaults={"role": role}
        )
        audit(
            actor=actor,
            action=AuditAction.MEMBERSHIP_SET,
            project=project,
            target=user.get_username(),
            details={"role": role},
        )
    return membership


def application_create(
    *, actor: Actor | None, project: Project, slug: str, name: str
) -> Application:
    if actor is not None:
        require_manager(actor, project)
    slug = _slug("id", slug)
    name = require_name("name", name or slug)
    if Application.objects.filter(project=project, slug=slug).exists():
        raise invalid("id", f"Application {slug} already exists in {project.slug}.")
    with transaction.atomic():
        application = Application.objects.create(project=project, slug=slug, name=name)
        audit(actor=actor, action=AuditAction.APPLICATION_CREATE, project=project, target=slug)
    return application


def repository_create(*, actor: Actor | None, slug: str, path: str) -> Repository:
    """Register a git repository readable on this server (administrators only)."""
    if actor is not None:
        _require_superuser(actor, "register repositories")
    slug = _slug("id", slug)
    if not isinstance(path, str) or not path or len(path) > PATH_MAX:
        raise invalid("path", f"path must be 1–{PATH_MAX} characters.")
    reject_unstorable("path", path)
    if Repository.objects.filter(slug=slug).exists():
        raise invalid("id", f"Repository {slug} already exists.")
    evidence_checks.resolve_commit(repo_path=path, revision="HEAD")
    with transaction.atomic():
        repository = Repository.objects.create(slug=slug, path=path)
        audit(actor=actor, action=AuditAction.REPOSITORY_CREATE, project=None, target=slug)
    return repository


def repository_link_set(
    *, actor: Actor | None, application: Application, repository: Repository, revision: str
) -> RepositoryLink:
    """Link (or re-pin) a repository for an application at a commit; the server resolves the
    revision to a full SHA. Audited: it changes which evidence-bound notes agents may read."""
    project = application.project
    if actor is not None:
        require_manager(actor, project)
    commit = evidence_checks.resolve_commit(repo_path=repository.path, revision=revision)
    with transaction.atomic():
        setting = lock_setting(project)
        link = RepositoryLink.objects.filter(application=application, repository=repository).first()
        previous = link.revision if link else ""
        if link is None:
            link = RepositoryLink.objects.create(
                application=application, repository=repository, revision=commit
            )
        elif link.revision != commit:
            link.revision = commit
            link.updated_at = timezone.now()
            link.save(update_fields=["revision", "updated_at"])
        else:
            return link
        bump(setting)
        audit(
            actor=actor,
            action=AuditAction.REPOSITORY_LINK,
            project=project,
            target=f"{application.slug}:{repository.slug}",
            details={"from": previous, "to": commit},
        )
    return link


def agent_create(
    *,
    actor: Actor | None,
    project: Project,
    name: str,
    stage: str,
    application: Application | None = None,
) -> Agent:
    if actor is not None:
        require_manager(actor, project)
    if stage not in Stage.values:
        raise invalid("stage", f"stage must be one of {', '.join(Stage.values)}.")
    name = require_name("name", name)
    if application is not None and application.project_id != project.pk:
        raise invalid("applicationId", "The application belongs to another project.")
    with transaction.atomic():
        agent = Agent.objects.create(
            project=project, application=application, name=name, stage=stage
        )
        audit(actor=actor, action=AuditAction.AGENT_CREATE, project=project, target=agent.pk)
    return agent


def run_create(
    *,
    actor: Actor | None,
    agent: Agent,
    parent: Run | None = None,
    task_key: str = "",
    task_title: str = "",
    task_description: str = "",
) -> Run:
    """Start a run of an agent (the orchestrator does this); a nested run shares its parent's
    top-level run and so its scratchpad and note quota. The task (title and description,
    optional) is what a start recall without a query scores against."""
    if actor is not None:
        require_manager(actor, agent.project)
    if parent is not None and parent.project_id != agent.project_id:
        raise invalid("parentRunId", "The parent run belongs to another project.")
    if len(task_key) > 64:
        raise invalid("taskKey", "taskKey holds at most 64 characters.")
    reject_unstorable("taskKey", task_key)
    task_title, task_description = run_task(task_title, task_description)
    with transaction.atomic():
        run = Run(
            agent=agent,
            project_id=agent.project_id,
            application_id=agent.application_id,
            parent=parent,
            task_key=task_key,
            task_title=task_title,
            task_description=task_description,
        )
        run.save(force_insert=True)
        audit(actor=actor, action=AuditAction.RUN_CREATE, project=agent.project, target=run.pk)
    return run


def run_update(
    *, actor: Actor | None, run: Run, status: str | None = None, step: str | None = None
) -> Run:
    """The orchestrator's report on a run: its status and / or the step it is in now (every
    note the run writes from then on records that step). A run that leaves `running` has
    finished: its tokens are revoked in the same transaction, so they stop working at once
    (SPEC §2.3), and it cannot run again or change step; its final status may still be
    corrected between succeeded and failed."""
    if actor is not None:
        require_manager(actor, run.project)
    if status is None and step is None:
        raise invalid("status", "Send status, step or both.")
    if status is not None and status not in RunStatus.values:
        raise invalid("status", "status must be running, succeeded or failed.")
    if step is not None:
        if not isinstance(step, str) or len(step) > STEP_MAX or "\n" in step:
            raise invalid("step", f"step is one line of at most {STEP_MAX} characters.")
        step = reject_unstorable("step", step).strip()
        check_no_secret(step=step)
    with transaction.atomic():
        setting = lock_setting(run.project)
        run = Run.objects.select_for_update().select_related("project").get(pk=run.pk)
        if run.status != RunStatus.RUNNING and (
            status == RunStatus.RUNNING or (step is not None and step != run.current_step)
        ):
            raise invalid(
                "status" if status == RunStatus.RUNNING else "step",
                f"Run {run.pk} has finished ({run.status}); a finished run does not run again.",
                hint="Start a new run (POST …/runs) for new work.",
            )
        now = timezone.now()
        changed: list[str] = []
        details: dict = {}
        if step is not None and step != run.current_step:
            run.current_step = step
            changed.append("current_step")
            details["step"] = step
        if status is not None and status != run.status:
            run.status = status
            run.finished_at = now
            changed += ["status", "finished_at"]
            details["status"] = status
            details["tokens_revoked"] = ApiToken.objects.filter(
                run=run, revoked_at__isnull=True
            ).update(revoked_at=now)
        if not changed:
            return run
        run.save(update_fields=changed)
        if "status" in details:
            bump(setting)  # producer status is visible on every note the run wrote
        audit(
            actor=actor,
            action=AuditAction.RUN_STATUS if "status" in details else AuditAction.RUN_STEP,
            project=run.project,
            target=run.pk,
            details=details,
        )
    return run


def run_delete(*, actor: Actor | None, run: Run) -> dict[str, int]:
    """Delete a run: its scratchpad (when it is a top-level run) goes, live references are
    cleared; notes keep the stage, agent and run id as text (producer status `unknown`)."""
    if actor is not None:
        require_manager(actor, run.project)
    project = run.project
    run_id = run.pk
    with transaction.atomic():
        setting = lock_setting(project)
        items = 0
        if run.top_level_run_id == run_id:
            items = ScratchpadItem.objects.filter(top_level_run_id=run_id).delete()[0]
        run.delete()
        bump(setting)
        audit(
            actor=actor,
            action=AuditAction.RUN_DELETE,
            project=project,
            target=run_id,
            details={"scratchpad_items": items},
        )
    return {"scratchpad_items": items}


def run_start(
    *,
    actor: Actor | None,
    agent: Agent,
    parent: Run | None = None,
    task_key: str = "",
    task_title: str = "",
    task_description: str = "",
    can_write: bool = True,
) -> tuple[Run, str]:
    """What an orchestrator does to start an agent: the run and its token, in one transaction
    (a run never exists without its token). The token's plaintext is returned once."""
    with transaction.atomic():
        run = run_create(
            actor=actor,
            agent=agent,
            parent=parent,
            task_key=task_key,
            task_title=task_title,
            task_description=task_description,
        )
        _token, plaintext = token_create(actor=actor, run=run, can_write=can_write)
    return run, plaintext


def token_create(
    *,
    actor: Actor | None,
    run: Run | None = None,
    user=None,
    can_write: bool = True,
) -> tuple[ApiToken, str]:
    """Mint a token for a run (an agent caller) or a user (a person). The plaintext is returned
    once and never stored."""
    if (run is None) == (user is None):
        raise ValueError("A token is bound to a run or to a user.")
    if actor is not None:
        if run is not None:
            require_manager(actor, run.project)
        else:
            require_person(actor, what="minting a person's token")
            if actor.user.pk != user.pk and not actor.user.is_superuser:
                raise MemoryPortalError("memory_forbidden", "Mint tokens for yourself only.")
    if user is not None and not isinstance(user, get_user_model()):
        raise ValueError("user must be a user")
    if run is not None and run.status != RunStatus.RUNNING:
        raise invalid(
            "runId",
            f"Run {run.pk} has finished ({run.status}); its tokens are revoked for good.",
            hint="Start a new run for new work.",
        )
    plaintext, prefix, secret_hash = tokens.generate()
    with transaction.atomic():
        token = ApiToken.objects.create(
            prefix=prefix, secret_hash=secret_hash, run=run, user=user, can_write=can_write
        )
        project = run.project if run is not None else None
        audit(
            actor=actor,
            action=AuditAction.TOKEN_CREATE,
            project=project,
            target=f"tok_{prefix}",
            details={"scopes": token.scopes, "run": run.pk if run else ""},
        )
    return token, plaintext


def token_revoke(*, actor: Actor | None, token: ApiToken) -> ApiToken:
    if actor is not None and token.run is not None:
        require_member(actor, token.run.project)
        require_manager(actor, token.run.project)
    with transaction.atomic():
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        audit(
            actor=actor,
            action=AuditAction.TOKEN_REVOKE,
            project=token.run.project if token.run_id else None,
            target=f"tok_{token.prefix}",
        )
    return token
