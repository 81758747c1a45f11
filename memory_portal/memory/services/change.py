"""One unit of work for every change to a project (SPEC §2.4): `project_change()`.

Every service that changes a project's memory opens one: it takes the project's lock once (its
setting row, locked for the rest of the transaction; SQLite runs every write transaction
IMMEDIATE, so there one writer holds the database), holds that one row, and makes explicit
what the change must do:

- the checks against the locked row: the revocation epoch read before the lock (a disable or
  reset since refuses the change) and the agent gate (memory on, the agent eligible and
  allowed to write);
- the counters' moves and the setting's fields, collected and written with the revision's
  advance in one UPDATE when the block ends (or with the lock itself, for the write);
- the audit rows, carrying the change's own details (a revert marks the events of every note
  it changes with its id);
- for a new note: the refused-content check, idempotency, both caps, and the API call's place
  in the run's budget, all read in one statement under the lock (`admit`).

A change inside another (a revert vetoing notes, the daily review lifting a line) passes the
outer one as `within`: one lock, one revision, one UPDATE of the row, and a failed inner change
rolls back to its savepoint with its collected moves."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from .. import counters, deadline, fastsql, outbox
from ..access import check_agent_gate, project_not_found, request_setting
from ..actors import Actor
from ..audit_actions import AuditAction
from ..errors import MemoryPortalError
from ..models import AuditEvent, Event, MemorySetting, Note, Project, Status, Trust, refusal
from ..selectors import note_by_id_q, note_get, note_not_found
from ._common import audit_event, live_twin
from .trace import OpenCall, budget_spent


def current_setting(actor: Actor | None, project: Project) -> MemorySetting:
    """The project's switch and epoch as they are now, read without a lock (step 1 of the
    write protocol): as this request's token check read them, or read now. A project without
    its row yet (it is made by the first change) reads as the row's defaults."""
    found = request_setting(actor, project) if actor is not None else None
    return found or fastsql.read_setting(project.pk) or MemorySetting(project_id=project.pk)


@dataclass
class _Pending:
    """What the change has collected for the setting row's one UPDATE, and the outbox events
    to number and insert with it."""

    changed: bool = False
    counted: dict[str, int] = field(default_factory=dict)
    fields: dict = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)

    def copy(self) -> _Pending:
        return _Pending(self.changed, dict(self.counted), dict(self.fields), list(self.events))


class ProjectChange:
    """A change in progress: the project, its locked setting row, the actor, and what is to be
    written with the revision's advance. Made by `project_change()` only."""

    def __init__(
        self,
        project: Project,
        actor: Actor | None,
        *,
        call: OpenCall | None = None,
        audit_details: dict | None = None,
    ) -> None:
        self.project = project
        self.actor = actor
        self.call = call  # the API call this change may take from its run's budget
        self.audit_details = dict(audit_details or {})
        self.setting: MemorySetting | None = None
        self.now = timezone.now()
        self._pending = _Pending()
        self._bumped = False  # the revision advanced with the lock already

    # --- the lock ---------------------------------------------------------------------------

    def _lock(self, inserting: dict[str, int] | None) -> None:
        """Lock the setting row: with `inserting` (the counters of the note about to be
        inserted) the lock is the revision's advance, one statement; otherwise a plain row
        lock, the advance written when the block ends."""
        if inserting is not None:
            self.setting = fastsql.lock_and_bump(self.project.pk, now=self.now, counted=inserting)
            if self.setting is None:  # a project made before its setting row: make it first
                self._make_row()
                self.setting = fastsql.lock_and_bump(
                    self.project.pk, now=self.now, counted=inserting
                )
            self._bumped = True
        else:
            with fastsql.bounded_lock_wait():
                self.setting = self._locked_row()
            if self.setting is None:
                self._make_row()
                self.setting = self._locked_row()
        # A caller holding the same project object (the dashboard re-rendering its header)
        # sees the state this change leaves, unread.
        self.project.memory_setting = self.setting

    def _locked_row(self) -> MemorySetting | None:
        return MemorySetting.objects.select_for_update().filter(project_id=self.project.pk).first()

    def _make_row(self) -> None:
        if not Project.objects.filter(pk=self.project.pk).exists():
            # Deleted while this change was on its way (project_delete holds this lock):
            # refuse cleanly rather than fail on the foreign key.
            raise project_not_found(self.project.slug)
        MemorySetting.objects.get_or_create(
            project_id=self.project.pk, defaults=counters.recounted(self.project.pk)
        )

    # --- the checks against the locked row --------------------------------------------------

    def check_epoch(self, epoch: int) -> None:
        """Memory was not disabled or reset since `epoch` was read (before the lock)."""
        if self.setting.revocation_epoch != epoch:
            raise MemoryPortalError(
                "memory_write_revoked",
                "Memory was disabled or reset while this write was being checked.",
                hint="Check memory_status, then send the write again.",
            )

    def check_gate(self) -> None:
        """The agent gate of a write, against the locked row (a person: the writer scope)."""
        check_agent_gate(self.actor, self.setting, write=True)

    # --- what the change records ------------------------------------------------------------

    def changed(
        self, *, counted: dict[str, int] | None = None, wrote_note: bool = False, **fields
    ) -> None:
        """The project changed: its revision advances once when the block ends, with the
        counters' moves `counted` (counters.moved) and the setting's `fields`, in one UPDATE."""
        pending = self._pending
        pending.changed = True
        if counted:
            pending.counted = counters.combined(pending.counted, counted)
        if wrote_note:
            fields["last_write_at"] = timezone.now()
        self.store(**fields)

    def store(self, **fields) -> None:
        """Keep `fields` on the setting row with the change's UPDATE, without advancing the
        revision: bookkeeping that changes no memory an agent sees (a count of webhooks)."""
        for name, value in fields.items():
            setattr(self.setting, name, value)
        self._pending.fields.update(fields)

    def event(
        self,
        action: AuditAction,
        *,
        note: Note | None = None,
        actor: Actor | None | bool = True,
        **fields,
    ) -> AuditEvent:
        """The unsaved audit row of `action` in this change (`actor=None`: the system), with
        the change's own details; `fields`: recovery_id, target, details. An action that is an
        event (outbox.EVENT_TYPES) also puts its outbox row in this change, inserted and
        numbered when the change ends, in its transaction."""
        details = {**self.audit_details, **(fields.pop("details", None) or {})}
        who = self.actor if actor is True else actor
        row = audit_event(
            actor=who, action=action, project=self.project, note=note, details=details, **fields
        )
        event = outbox.event_of(row, project=self.project, note=note)
        if event is not None:
            self._pending.events.append(event)
        return row

    def audit(self, action: AuditAction, **kwargs) -> AuditEvent:
        """Record `action` now (one INSERT). `details` carries ids, counts and reasons, never
        note content."""
        return fastsql.insert(self.event(action, **kwargs))

    def save_note(
        self,
        note: Note,
        fields: tuple[str, ...],
        action: AuditAction,
        *,
        was: counters.State | None = None,
        **audit_fields,
    ) -> None:
        """One change to an existing note, recorded: its `fields` saved (with `updated_at`),
        the counters moved when the note left the state `was` (its status and trust before),
        the action audited (`audit_fields`: details, recovery_id)."""
        note.updated_at = timezone.now()
        note.save(update_fields=[*fields, "updated_at"])
        self.changed(counted=counters.moved(was, note) if was is not None else None)
        self.audit(action, note=note, **audit_fields)

    def change_note(self, note: Note, action: AuditAction, changes: dict, **audit_fields) -> None:
        """Set `changes` (field: value) on `note` and record them with `save_note`."""
        before = counters.state_of(note)
        for name, value in changes.items():
            setattr(note, name, value)
        self.save_note(note, tuple(changes), action, was=before, **audit_fields)

    def note(self, note_id: str, *, twin: bool = True) -> Note:
        """The note read under the lock, as this change's actor may see it in this project.
        With `twin`, another live note of the same content comes along as `live_twin_id`."""
        by_id = note_by_id_q(actor=self.actor, project=self.project, note_id=note_id)
        notes = Note.objects.select_for_update().filter(by_id)
        if twin:
            notes = notes.annotate(live_twin_id=live_twin())
        note = notes.first()
        if note is None:
            raise note_not_found(note_id)
        note.project = self.project
        return note

    # --- a new note: the write protocol's checks under the lock -----------------------------

    def admit(self, note: Note) -> str | None:
        """Judge a new note under the lock, from one statement (fastsql.write_check): the API
        call taken from its run's budget (with `call`), never-resurrect, idempotency, then both
        caps. Returns the id of an identical live note in the same place instead, when there
        is one (the write is then an idempotent repeat)."""
        take = self.call.to_take(timezone.now()) if self.call is not None else None
        check = self._write_check(note, take)
        if take is not None:
            if check.calls_used is None:
                raise budget_spent(self.call.run)
            self.call.run.tool_calls = check.calls_used
            self.call.settled = True  # with this transaction: undone if it rolls back
        existing = _refuse_resurrection(check.same)
        if existing is None:
            self._check_caps(check)
        return existing

    def check_caps(self, note: Note) -> None:
        """Both caps for a new note that is no idempotent repeat (a day log's first line)."""
        self._check_caps(self._write_check(note, None))

    def _write_check(self, note: Note, take: fastsql.CallToTake | None) -> fastsql.WriteCheck:
        top = self.actor.run.top_level_run_id if self.actor and self.actor.is_agent else ""
        return fastsql.write_check(self.project.pk, note.place_key, note.content_key, top, take)

    def _check_caps(self, check: fastsql.WriteCheck) -> None:
        cap = settings.MEMORY_PORTAL["PROJECT_NOTE_CAP"]
        if check.total >= cap:
            raise MemoryPortalError(
                "memory_project_full",
                f"Project {self.project.slug} stores {cap} notes, its limit.",
            )
        quota = settings.MEMORY_PORTAL["RUN_NOTE_QUOTA"]
        if self.actor is not None and self.actor.is_agent and check.by_run >= quota:
            hint = f"A run writes at most {quota} new notes; finish the task, or start a new run."
            raise MemoryPortalError(
                "memory_run_quota",
                f"Run {self.actor.run.top_level_run_id} already wrote {quota} new notes.",
                hint=hint,
            )

    def discard(self) -> None:
        """Nothing changed after all (an idempotent repeat): the transaction, the lock's
        revision advance and the API call taken with it are rolled back when the block ends."""
        transaction.set_rollback(True)
        self._pending = _Pending()
        self._unsettle()

    def _unsettle(self) -> None:
        if self.call is not None:
            self.call.settled = False

    # --- the end ----------------------------------------------------------------------------

    def _flush(self) -> None:
        pending = self._pending
        if not pending.changed and not pending.events and not pending.fields:
            return
        values = dict(pending.fields)
        values.update(counters.changes(self.setting, pending.counted))
        if pending.changed and not self._bumped:
            self.setting.revision += 1
            values["revision"] = self.setting.revision
            self._bumped = True
        if pending.events:  # numbered under the lock: a project's events have no gap
            for event in pending.events:
                self.setting.event_seq += 1
                event.number = self.setting.event_seq
            values["event_seq"] = self.setting.event_seq
            Event.objects.bulk_create(pending.events)
            outbox.announce_after_commit(
                self.project.pk,
                listeners=self.setting.listeners,
            )
        if values:
            MemorySetting.objects.filter(pk=self.setting.pk).update(**values)
        self._pending = _Pending()


_REFUSED = {
    "forgotten": (
        "memory_forgotten",
        "The same content was forgotten ({id}).",
        "A manager can restore it from Recoveries; do not write it again.",
    ),
    "rejected": (
        "memory_rejected",
        "The same content was rejected by a manager ({id}).",
        "A person decided against this content; write something else.",
    ),
    "vetoed": (
        "memory_vetoed",
        "The same content was vetoed ({id}).",
        "A person decided against this content; write something else.",
    ),
}


def _refuse_resurrection(same: list[fastsql.SameContent]) -> str | None:
    """The id of an identical active note in the same place (an idempotent write returns it);
    content that was forgotten, rejected or vetoed anywhere in the project, in any kind, place
    or route, is refused — a write never brings it back (SPEC §2.3; querysets.refusal)."""
    active = next((row for row in same if row.same_place and row.status == Status.ACTIVE), None)
    if active is not None and active.trust != Trust.REJECTED:
        return active.id
    removed = {}
    for row in same:
        removed.setdefault(refusal(row.status, row.trust, row.archive_reason), row.id)
    for how, (code, message, hint) in _REFUSED.items():  # forgotten first, then rejected
        if how in removed:
            raise MemoryPortalError(code, message.format(id=removed[how]), hint=hint)
    return None


@contextmanager
def project_change(
    project: Project,
    *,
    actor: Actor | None,
    epoch: int | None = None,
    gate: bool = False,
    inserting: dict[str, int] | None = None,
    call: OpenCall | None = None,
    audit_details: dict | None = None,
    within: ProjectChange | None = None,
) -> Iterator[ProjectChange]:
    """Change `project` in one transaction under its lock (see the module). `epoch`: refuse
    when memory was disabled or reset since it was read; `gate`: the agent gate of a write,
    against the locked row; `inserting`: the counters of the new note, taken with the lock;
    `call`: the API call the change takes from its run's budget (services/trace.py);
    `within`: the change this one is part of."""
    if within is not None:
        assert within.project.pk == project.pk, "a change within another is of its project"
        saved = within._pending.copy()
        try:
            with transaction.atomic():
                if epoch is not None:
                    within.check_epoch(epoch)
                if gate:
                    within.check_gate()
                yield within
        except BaseException:
            within._pending = saved
            raise
        return
    deadline.check()  # a call out of time starts no change (memory/deadline.py)
    change = ProjectChange(project, actor, call=call, audit_details=audit_details)
    try:
        with transaction.atomic():
            change._lock(inserting)
            if epoch is not None:
                change.check_epoch(epoch)
            if gate:
                change.check_gate()
            yield change
            change._flush()
            deadline.check()  # nor commits one that ran past its time: it rolls back whole
    except BaseException:
        change._unsettle()  # the API call's budget and trace row rolled back too
        raise


def note_project(actor: Actor, note_id: str, project: Project | None) -> Project:
    """The project of the note a change is about: the caller's, when it knows it (the
    dashboard's URL), else the note's own as the actor may see it."""
    return project if project is not None else note_get(actor=actor, note_id=note_id).project
