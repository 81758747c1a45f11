"""What the product keeps about runs besides the run row (SPEC §2): the per-run tool-call
trace, the start-of-run recall window, the recalls per day, the daily review routine and its
runs, and the reverts of runs. Re-exported by models.py, which the app's models are
registered through."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from .choices import RunStatus
from .ids import new_revert_id


class ToolCallCount(models.Model):
    """The trace of a run's tool calls: one counter per (tool, outcome code)."""

    run = models.ForeignKey("Run", on_delete=models.CASCADE, related_name="tool_call_counts")
    tool = models.CharField(max_length=40)
    outcome = models.CharField(max_length=40)
    count = models.PositiveIntegerField(default=0)
    last_called_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "tool", "outcome"], name="tool_call_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.run_id} {self.tool} {self.outcome}: {self.count}"


class StartRecall(models.Model):
    """When a top-level run last had its start-of-run recall (the 24-hour skip window)."""

    top_level_run_id = models.CharField(max_length=40, unique=True)
    agent_id = models.CharField(max_length=40)
    recalled_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.top_level_run_id} @ {self.recalled_at:%Y-%m-%d %H:%M}"


class ReadTool(models.TextChoices):
    """How a note was served to an agent (NoteRead.tool), whatever the transport."""

    READ = "read"  # memory_read, by id or a page of a target
    SEARCH = "search"  # memory_search
    RECALL = "recall"  # an on-demand recall (v1)
    START_RECALL = "start_recall"  # the start-of-run recall (v1 start, the MCP prompt)
    LIST = "list"  # GET /api/v1/memories


class SmallCode(models.PositiveSmallIntegerField):
    """A choice among a fixed list of words kept as its place in the list (a two-byte integer),
    read and written as the word: `tool="search"` filters, `read.tool == "search"`. New words
    go at the end; none is ever removed or moved."""

    def __init__(self, *args, words: tuple[str, ...] = (), **kwargs):
        self.words = tuple(words)
        self._codes = {word: code for code, word in enumerate(self.words)}
        super().__init__(*args, **kwargs)

    def deconstruct(self):
        name, path, args, kwargs = super().deconstruct()
        kwargs["words"] = self.words
        return name, path, args, kwargs

    def from_db_value(self, value, expression, connection):
        return None if value is None else self.words[value]

    def to_python(self, value):
        if value is None or isinstance(value, str):
            return value
        return self.words[int(value)]

    def get_prep_value(self, value):
        if value is None or isinstance(value, int):
            return value
        return self._codes[str(value)]


class NoteRead(models.Model):
    """One note served to an agent's run (SPEC §2.10): which note, to which run (its agent and
    top-level run are the run's), by which tool, its rank in the answer and its score where
    there is one, its trust at that moment, and when — never the query. One insert per call,
    before the answer (services/reads.py). Kept MEMORY_PORTAL_READ_RETENTION_DAYS; a note's and
    a run's go with them (a reset, a deletion): nothing hangs off a read, so Django deletes them
    without fetching them first.

    Built small, as it grows by one row per note served (docs/CONCEPTS.md, "Read records"):
    the note and the run by their eight-byte `read_key`s rather than their 31-character ids;
    the tool and the trust as two-byte codes; the columns in an order that leaves no padding;
    two indexes — a note's reads newest first, and a run's (deduplicated: a run's reads share
    one entry). The primary key is the ORM's only: migration 0022 drops its constraint on
    PostgreSQL, where its index would cost a third of the table (a read is never addressed on
    its own: no update, no single delete). Retention finds old reads by a BRIN index on
    `read_at` (a plain one on SQLite), made by that migration too."""

    pk = models.CompositePrimaryKey("run", "read_at", "note")
    run = models.ForeignKey(
        "Run",
        on_delete=models.CASCADE,
        to_field="read_key",
        db_column="run_key",
        related_name="reads",
        db_index=False,
    )
    read_at = models.DateTimeField(default=timezone.now)
    note = models.ForeignKey(
        "Note",
        on_delete=models.CASCADE,
        to_field="read_key",
        db_column="note_key",
        related_name="reads",
        db_index=False,
    )
    score = models.FloatField(null=True, blank=True)
    rank = models.PositiveSmallIntegerField()
    tool = SmallCode(words=("read", "search", "recall", "start_recall", "list"))
    trust = SmallCode(words=("learned", "reviewed", "rejected"))

    class Meta:
        db_table = "project_memory_read"
        indexes = [
            # A note's readers (walked backwards, newest first: ascending, as reads come in at
            # each note's end, the pages fill; descending they would split half empty); a
            # run's reads (a run holds few: they are sorted).
            models.Index(fields=["note", "read_at"], name="reads_of_note"),
            models.Index(fields=["run"], name="reads_of_run"),
        ]

    def __str__(self) -> str:
        return f"note {self.note_id} read by run {self.run_id} ({self.tool} #{self.rank})"


class RecallDay(models.Model):
    """The recalls of one project on one UTC day that served notes, and the notes they served
    (the overview's recall chart); counted where a recall marks its picks."""

    project = models.ForeignKey("Project", on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    recalls = models.PositiveIntegerField(default=0)
    picks = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "day"], name="recall_day_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.project_id} {self.day}: {self.recalls} recalls, {self.picks} picks"


class ReviewRoutine(models.Model):
    """An agent's daily review ("Memory dreaming"), created by its first save; due every day
    at 04:00 UTC. Deleting it keeps the row (deleted_at) so a later save does not revive it."""

    NAME = "Memory dreaming"

    agent = models.OneToOneField("Agent", on_delete=models.CASCADE, related_name="review_routine")
    paused = models.BooleanField(default=False)
    next_run_at = models.DateTimeField()
    last_run_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["paused", "next_run_at"], name="routine_due")]

    def __str__(self) -> str:
        return f"{self.NAME} of {self.agent_id}"

    @property
    def state(self) -> str:
        if self.deleted_at is not None:
            return "deleted"
        return "paused" if self.paused else "active"


class ReviewRun(models.Model):
    """One execution of a routine and what it did. A scheduled run is unique per routine and
    UTC day, which is what keeps overlapping cron invocations from running a day twice."""

    TRIGGERS = [("schedule", "schedule"), ("manual", "manual")]

    routine = models.ForeignKey(ReviewRoutine, on_delete=models.CASCADE, related_name="runs")
    day = models.DateField()
    trigger = models.CharField(max_length=10, choices=TRIGGERS)
    status = models.CharField(max_length=12, choices=RunStatus.choices, default=RunStatus.RUNNING)
    run_ref = models.CharField(max_length=40, blank=True)
    counts = models.JSONField(default=dict, blank=True)
    error_code = models.CharField(max_length=64, blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["routine", "day"],
                condition=Q(trigger="schedule"),
                name="review_run_once_per_day",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.routine_id} {self.day} {self.trigger} {self.status}"


class RunRevert(models.Model):
    """One revert of a run (and its nested runs): exactly what it changed, note by note, so
    its undo puts back that and nothing else (services/revert.py, revert_undo.py)."""

    id = models.CharField(primary_key=True, max_length=40, default=new_revert_id, editable=False)
    project = models.ForeignKey("Project", on_delete=models.CASCADE, related_name="run_reverts")
    run = models.ForeignKey(
        "Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="reverts"
    )
    run_ref = models.CharField(max_length=40, db_index=True)
    run_ids = models.JSONField(default=list, blank=True)
    # One entry per changed note: {"note", "action", …what undo needs to put it back}.
    items = models.JSONField(default=list, blank=True)
    counts = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    undone_at = models.DateTimeField(null=True, blank=True)
    undone_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        db_table = "project_memory_run_revert"
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.id} of {self.run_ref}"

    @property
    def undone(self) -> bool:
        return self.undone_at is not None
