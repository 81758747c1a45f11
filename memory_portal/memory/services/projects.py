"""Project services: projects and their deletion, applications, repositories and their pinned
links, memberships."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from .. import counters, fastsql
from .. import evidence as evidence_checks
from ..access import (
    application_not_found,
    is_administrator,
    require_administrator,
    require_manager,
    require_member,
)
from ..actors import Actor
from ..audit_actions import AuditAction
from ..errors import MemoryPortalError, invalid
from ..models import (
    Agent,
    Application,
    Membership,
    MemorySetting,
    Note,
    Project,
    Repository,
    RepositoryLink,
    Role,
    Run,
    StartRecall,
    Status,
)
from ..validation import PATH_MAX, SLUG_CHARS, SLUG_MAX, gate, require_name
from ._common import audit, audit_event
from .change import project_change


def _slug(field: str, value: object) -> str:
    if not isinstance(value, str) or not value or len(value) > SLUG_MAX:
        raise invalid(field, f"{field} must be a slug of 1–{SLUG_MAX} characters.")
    if SLUG_CHARS.fullmatch(value) is None:
        raise invalid(field, f"{field} may hold letters, digits, - and _ only.")
    return value


def project_create(*, actor: Actor | None, slug: str, name: str, manager=None) -> Project:
    """A project and its memory setting row (memory off), with `manager` (a person) as its
    first manager when given. Administrators only; `actor=None` is the system (management
    commands)."""
    if actor is not None:
        require_administrator(actor, "create projects")
    slug = _slug("id", slug)
    name = require_name("name", name or slug)
    if Project.objects.filter(slug=slug).exists():
        raise invalid("id", f"Project {slug} already exists.")
    with transaction.atomic():
        project = Project.objects.create(slug=slug, name=name)
        MemorySetting.objects.create(project=project)
        audit(actor=actor, action=AuditAction.PROJECT_CREATE, project=project)
        if manager is not None:
            membership_set(actor=None, project=project, user=manager, role=Role.MANAGER)
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
    "memory.Event": "events",
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
        require_administrator(actor, "delete projects")
    _require_typed_confirmation(what="project", slug=project.slug, confirm=confirm)
    slug = project.slug
    # The lock waits for in-flight writes; later ones find no project.
    with project_change(project, actor=actor):
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
    with project_change(project, actor=actor) as change:
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
        change.changed(
            revocation_epoch=change.setting.revocation_epoch + 1,
            **counters.recounted(project.pk),
        )
        change.audit(AuditAction.APPLICATION_DELETE, target=slug, details=counts)
    return counts


def _keep_a_manager(project: Project, user, *, leaving: str) -> None:
    """Refuse a change that would leave the project without a manager (its managers' rows
    locked, so two managers stepping down at once cannot both succeed)."""
    managers = list(
        Membership.objects.select_for_update()
        .filter(project=project, role=Role.MANAGER)
        .values_list("user_id", flat=True)
    )
    if managers == [user.pk]:
        raise MemoryPortalError(
            "project_last_manager",
            f"{user.get_username()} is the last manager of {project.slug}; {leaving}.",
        )


def membership_set(*, actor: Actor | None, project: Project, user, role: str) -> Membership:
    """Add a person to the project, or change their role (managers; `actor=None` is the
    system). The last manager stays one."""
    if actor is not None:
        require_manager(actor, project)
    if role not in Role.values:
        raise invalid("role", "role must be member or manager.")
    with transaction.atomic():
        if role != Role.MANAGER:
            _keep_a_manager(project, user, leaving="they stay a manager")
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


def membership_remove(*, actor: Actor | None, project: Project, user) -> None:
    """Take a person out of the project (managers): they no longer see it; what they did
    stays, under their name. Never the last manager."""
    if actor is not None:
        require_manager(actor, project)
    with transaction.atomic():
        _keep_a_manager(project, user, leaving="they cannot leave it")
        removed, _ = Membership.objects.filter(project=project, user=user).delete()
        if not removed:
            raise MemoryPortalError(
                "not_found", f"{user.get_username()} is not a member of {project.slug}."
            )
        audit(
            actor=actor,
            action=AuditAction.MEMBERSHIP_REMOVE,
            project=project,
            target=user.get_username(),
        )


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
        require_administrator(actor, "register repositories")
    slug = _slug("id", slug)
    if not isinstance(path, str) or not path or len(path) > PATH_MAX:
        raise invalid("path", f"path must be 1–{PATH_MAX} characters.")
    gate("path", path, max_len=PATH_MAX, line=True)
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
    with project_change(project, actor=actor) as change:
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
        change.changed()
        change.audit(
            AuditAction.REPOSITORY_LINK,
            target=f"{application.slug}:{repository.slug}",
            details={"from": previous, "to": commit},
        )
    return link
