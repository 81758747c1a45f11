"""Every state change of Memory Portal, one function per action (SPEC §2.3). The dashboard,
the API, the CLI, management commands and tasks all call these; nothing else writes."""

from ._common import tasks_run_in_process
from .change import ProjectChange, project_change
from .day import day_append
from .deliveries import deliver_due, delivery_retry
from .keys import (
    agent_change,
    agent_retire,
    key_create,
    key_revoke,
    key_run_start,
    mcp_session_close,
    mcp_session_open,
    mcp_session_run,
    runs_finish_idle,
)
from .lifecycle import (
    note_archive,
    note_forget,
    note_restore,
    note_unarchive,
    note_undo,
    note_veto,
    notes_mark_recalled,
)
from .notes import fact_save, note_edit, note_write
from .notifications import (
    alerts_send,
    digests_send,
    notifications_set,
    notifications_unsubscribe,
    webhook_off_notify,
)
from .people import person_change, person_invite, person_sign_in
from .projects import (
    application_create,
    application_delete,
    membership_remove,
    membership_set,
    project_create,
    project_delete,
    repository_create,
    repository_link_set,
)
from .reads import reads_prune, reads_record
from .revert import run_revert
from .revert_undo import run_revert_undo
from .review import note_approve, note_reject, note_reverify, note_unreview
from .routines import (
    routine_delete,
    routine_execute,
    routine_pause,
    routine_resume,
    routine_run_now,
    routines_run_due,
)
from .runs import (
    agent_create,
    run_create,
    run_delete,
    run_start,
    run_update,
    token_create,
    token_revoke,
)
from .schedule import routine_ensure
from .scratchpad import (
    scratchpad_add,
    scratchpad_clear,
    scratchpad_done,
    scratchpad_undo,
)
from .settings import memory_disable, memory_enable, memory_policy_set, memory_reset
from .trace import OpenCall, run_budget_spent, run_call_consume, tool_call_record
from .webhooks import (
    WEBHOOKS_MAX,
    webhook_change,
    webhook_create,
    webhook_delete,
    webhook_rotate,
    webhook_test,
)

# The note verbs, one table for every transport: the dashboard's row buttons and bulk form and
# the admin API call the service of a verb through it. Each service judges its note itself.
NOTE_VERBS = {
    "approve": note_approve,
    "reject": note_reject,
    "unreview": note_unreview,
    "veto": note_veto,
    "undo": note_undo,
    "unarchive": note_unarchive,
    "archive": note_archive,
    "edit": note_edit,
    "forget": note_forget,
    "reverify": note_reverify,
}
# The verbs that take no input beyond the note, offered for many notes at once (undo: of a
# veto, so a bulk veto can be undone).
BULK_VERBS = ("approve", "reject", "veto", "undo", "forget")

__all__ = [
    "reads_prune",
    "reads_record",
    "alerts_send",
    "digests_send",
    "notifications_set",
    "notifications_unsubscribe",
    "webhook_off_notify",
    "BULK_VERBS",
    "NOTE_VERBS",
    "ProjectChange",
    "project_change",
    "tasks_run_in_process",
    "agent_create",
    "agent_change",
    "agent_retire",
    "key_create",
    "key_revoke",
    "key_run_start",
    "mcp_session_close",
    "mcp_session_open",
    "mcp_session_run",
    "runs_finish_idle",
    "application_create",
    "application_delete",
    "OpenCall",
    "day_append",
    "fact_save",
    "membership_remove",
    "person_change",
    "person_invite",
    "person_sign_in",
    "membership_set",
    "memory_disable",
    "memory_enable",
    "deliver_due",
    "WEBHOOKS_MAX",
    "delivery_retry",
    "webhook_change",
    "webhook_create",
    "webhook_delete",
    "webhook_rotate",
    "webhook_test",
    "memory_policy_set",
    "memory_reset",
    "note_approve",
    "note_unreview",
    "note_archive",
    "note_edit",
    "note_forget",
    "note_reject",
    "note_restore",
    "note_reverify",
    "note_unarchive",
    "note_undo",
    "note_veto",
    "note_write",
    "notes_mark_recalled",
    "project_create",
    "project_delete",
    "repository_create",
    "repository_link_set",
    "routine_delete",
    "routine_ensure",
    "routine_execute",
    "routine_pause",
    "routine_resume",
    "routine_run_now",
    "routines_run_due",
    "run_budget_spent",
    "run_call_consume",
    "run_create",
    "run_delete",
    "run_revert",
    "run_revert_undo",
    "run_start",
    "run_update",
    "scratchpad_add",
    "scratchpad_clear",
    "scratchpad_done",
    "scratchpad_undo",
    "token_create",
    "token_revoke",
    "tool_call_record",
]
