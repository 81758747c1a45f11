"""The one error hierarchy of Memory Portal: every refusal carries a SPEC §8 code, an HTTP
status, a message and a hint saying what to do next. The API maps it to its JSON envelope once;
the dashboard shows it as a message. Messages never quote note content, queries or secrets."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ErrorCode:
    status: int
    hint: str
    retry_after: int | None = None  # seconds; set for the retryable 503s


CODES: dict[str, ErrorCode] = {
    # From the agent-memory source document.
    "memory_text_too_long": ErrorCode(400, "Shorten it, or split it into two facts."),
    "secret_in_memory": ErrorCode(400, "Keep secrets in a secret store, never in memory."),
    "memory_agent_required": ErrorCode(400, "Pass agentId (or --agent) to name the agent."),
    "memory_agent_mismatch": ErrorCode(400, "Supersede one of the same agent's memories."),
    "memory_day_append_only": ErrorCode(400, "Append a new line to the day log instead."),
    "memory_not_own": ErrorCode(403, "Act on your own memories."),
    "memory_day_agent_only": ErrorCode(403, "Only an agent keeps a day log."),
    "memory_veto_human_only": ErrorCode(403, "Ask a person to review the veto."),
    "memory_not_found": ErrorCode(404, "Check the mem_ id."),
    "memory_supersede_archived": ErrorCode(409, "Supersede a live memory."),
    "memory_day_full": ErrorCode(409, "Save what matters as a fact instead."),
    "memory_superseded": ErrorCode(409, "Edit the newer memory instead."),
    "memory_day_exists": ErrorCode(409, "Archive the live day log of that date first."),
    # Project memory and the portal.
    "memory_disabled": ErrorCode(403, "Ask a project manager to enable memory."),
    "memory_not_eligible": ErrorCode(403, "Memory tools are offered to eligible stages only."),
    "memory_tool_forbidden": ErrorCode(403, "Use a tool this caller is allowed to use."),
    "memory_trust_locked": ErrorCode(403, "Ask a project manager to change reviewed notes."),
    "memory_forbidden": ErrorCode(403, "Ask a project manager to do this."),
    "memory_write_revoked": ErrorCode(409, "Memory changed while the write was checked; retry."),
    "memory_project_full": ErrorCode(
        409,
        "Every stored note counts, forgotten and archived ones too; only a reset of the "
        "project's memory frees space. Ask a project manager.",
    ),
    "memory_forgotten": ErrorCode(409, "Restore the forgotten note with its recoveryId."),
    "memory_rejected": ErrorCode(409, "A manager rejected this content; write something else."),
    "memory_vetoed": ErrorCode(409, "A person vetoed this content; ask them to undo the veto."),
    "memory_duplicate_active": ErrorCode(409, "Archive the live copy of this content first."),
    # The raising code states the configured limit in its own hint.
    "memory_run_quota": ErrorCode(429, "This run wrote all the notes it may; finish the task."),
    "memory_call_budget": ErrorCode(429, "This run used all its memory calls; finish the task."),
    "memory_run_busy": ErrorCode(
        429,
        "This run has as many calls in flight as it may; send this one again once one answers.",
        retry_after=1,
    ),
    "memory_payload_too_large": ErrorCode(413, "Shorten the content, summary or tags."),
    "memory_invalid": ErrorCode(400, "Fix the named field and retry."),
    "memory_evidence_invalid": ErrorCode(400, "Cite a regular file at the pinned revision."),
    "memory_recovery_not_found": ErrorCode(404, "List recoveries for a valid rec_ id."),
    "memory_revert_undone": ErrorCode(409, "Revert the run again if its notes must go."),
    "project_last_manager": ErrorCode(409, "Make someone else a manager of the project first."),
    "import_limit": ErrorCode(400, "Send a file made by memory_export."),
    "import_members_unconfirmed": ErrorCode(
        400,
        "Check who the file makes members (the dry run lists them), then confirm: "
        "grantMembers=true (memory_import --grant-members; the dashboard's checkbox).",
    ),
    "scratchpad_full": ErrorCode(409, "Clear completed items first."),
    "review_running": ErrorCode(
        409, "Wait for the running review to finish; its result shows on the agent's page."
    ),
    "scratchpad_item_not_found": ErrorCode(404, "List the scratchpad for valid itm_ ids."),
    "auth_required": ErrorCode(401, "Send Authorization: Bearer <token>."),
    "auth_invalid": ErrorCode(
        401, "Use a current token; a finished run's token stops working, so start a new run."
    ),
    "not_found": ErrorCode(404, "Check the id in the URL."),
    "method_not_allowed": ErrorCode(405, "See /api/docs for the routes and their methods."),
    "internal_error": ErrorCode(500, "Retry later; tell the operators if it persists."),
    # Retryable: nothing was written; the same call is expected to work in a moment.
    "memory_busy": ErrorCode(
        503,
        "Another change to this project holds its lock; nothing was written. Retry the same "
        "call after Retry-After seconds.",
        retry_after=2,
    ),
    "memory_timeout": ErrorCode(
        503,
        "The call ran out of its time before it wrote anything; nothing was written. Retry "
        "the same call after Retry-After seconds.",
        retry_after=2,
    ),
    "memory_read_unrecorded": ErrorCode(
        503,
        "The notes found could not be recorded as read, so none were served. Retry the same "
        "call after Retry-After seconds.",
        retry_after=2,
    ),
    "service_unavailable": ErrorCode(
        503,
        "The database is unavailable for a moment; nothing was written. Retry the same call "
        "after Retry-After seconds.",
        retry_after=5,
    ),
}


class MemoryPortalError(Exception):
    """A refusal with a code from CODES. `field` names the offending input, when there is one;
    `reason` gives a machine-readable cause (evidence checks, secret rules)."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        hint: str | None = None,
        field: str | None = None,
        reason: str | None = None,
    ) -> None:
        if code not in CODES:
            raise ValueError(f"Unknown error code {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint or CODES[code].hint
        self.field = field
        self.reason = reason

    @property
    def status(self) -> int:
        return CODES[self.code].status

    @property
    def retry_after(self) -> int | None:
        return CODES[self.code].retry_after

    def as_dict(self) -> dict:
        body: dict = {"code": self.code, "message": self.message, "hint": self.hint}
        if self.field:
            body["field"] = self.field
        if self.reason:
            body["reason"] = self.reason
        return body

    def __repr__(self) -> str:
        return f"MemoryPortalError({self.code!r}, {self.message!r})"


def invalid(field: str, message: str, *, hint: str | None = None) -> MemoryPortalError:
    return MemoryPortalError("memory_invalid", message, field=field, hint=hint)


# SQLSTATEs of PostgreSQL failures that pass: a lock wait ran out (55P03), a deadlock victim
# (40P01), a serialization failure (40001), the server shutting down or starting (57P01–57P03),
# too many connections (53300).
_BUSY_SQLSTATES = {"55P03", "40P01", "40001"}
_UNAVAILABLE_SQLSTATES = {"57P01", "57P02", "57P03", "53300", "08000", "08003", "08006"}


def _counted_busy(refusal: MemoryPortalError, exc: BaseException) -> MemoryPortalError:
    from memory_portal import metrics

    metrics.busy(exc)
    return refusal


def retryable(exc: BaseException) -> MemoryPortalError | None:
    """The one classification of unexpected failures: a database failure that passes by itself
    becomes a 503 refusal (`memory_busy` for lock waits, `service_unavailable` for a database
    that is restarting, overloaded or unreachable); anything else is None — a bug, answered
    500. The transaction of the failed call was rolled back, so nothing was half written."""
    import sqlite3

    from django.db import InterfaceError, OperationalError

    if not isinstance(exc, OperationalError | InterfaceError):
        return None
    busy = MemoryPortalError("memory_busy", "The project is busy with another change.")
    unavailable = MemoryPortalError("service_unavailable", "The database is unavailable right now.")
    cause = exc.__cause__
    if isinstance(cause, sqlite3.Error):
        text = str(cause).lower()
        if "locked" in text or "busy" in text:
            return _counted_busy(busy, exc)
        if "disk i/o" in text or "unable to open" in text:
            return unavailable
        return None  # no such table, a syntax error…: a bug or a missing migration
    if isinstance(exc, InterfaceError):
        return unavailable  # the connection was already closed under us
    sqlstate = getattr(cause, "sqlstate", None)
    if sqlstate in _BUSY_SQLSTATES:
        return _counted_busy(busy, exc)
    if sqlstate is None or sqlstate in _UNAVAILABLE_SQLSTATES or sqlstate.startswith("08"):
        return unavailable  # could not connect, or the server went away mid-call
    if sqlstate == "57014":  # statement_timeout: overloaded right now
        return unavailable
    return None
