"""Dashboard views: parse the request, call one selector or service per change, render. The
rules live in memory_portal.memory; a refusal (MemoryPortalError) becomes a message or a toast,
and anything of a project a person does not belong to is a 404. `base` is the edge they share;
`pages` the read-only pages, `actions` the changes to notes, `controls` a project's switch,
reset, daily reviews and deletes, `activity` runs and the audit log."""

from .actions import (
    agent_fact_save,
    day_line_lift,
    note_action,
    note_panel,
    notes_bulk,
    notes_reach,
    recovery_restore,
)
from .activity import (
    audit,
    run_delete,
    run_detail,
    run_revert,
    run_revert_undo,
    run_status,
    runs,
)
from .base import LoginView
from .connect import agent_change, agent_create, connect, key_seen
from .controls import (
    agent_routine,
    application_delete,
    memory_disable,
    memory_enable,
    memory_policy,
    memory_reset,
    project_delete,
    project_export,
)
from .imports import import_check, import_page, import_run
from .members import member_add, member_change, member_invite, members, project_create
from .notifications import notifications, notifications_set, unsubscribe
from .pages import (
    agent_detail,
    agent_recall_preview,
    agents,
    note_detail,
    overview,
    project_memory,
    project_settings,
    projects,
    recoveries,
    review,
)
from .people import people, person_change
from .tokens import token_revoke, tokens
from .webhooks import delivery_retry, webhook_action, webhook_create

__all__ = [
    "LoginView",
    "member_add",
    "member_change",
    "member_invite",
    "members",
    "project_create",
    "people",
    "person_change",
    "notifications",
    "notifications_set",
    "unsubscribe",
    "agent_change",
    "agent_create",
    "connect",
    "key_seen",
    "agent_detail",
    "import_check",
    "import_page",
    "import_run",
    "agent_fact_save",
    "agent_recall_preview",
    "agent_routine",
    "agents",
    "application_delete",
    "audit",
    "day_line_lift",
    "memory_disable",
    "memory_enable",
    "memory_policy",
    "delivery_retry",
    "webhook_action",
    "webhook_create",
    "memory_reset",
    "note_action",
    "note_panel",
    "note_detail",
    "overview",
    "notes_bulk",
    "notes_reach",
    "project_delete",
    "project_export",
    "project_memory",
    "project_settings",
    "projects",
    "recoveries",
    "recovery_restore",
    "review",
    "run_delete",
    "run_detail",
    "run_revert",
    "run_status",
    "run_revert_undo",
    "runs",
    "token_revoke",
    "tokens",
]
