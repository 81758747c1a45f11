"""The memory domain's tables: context objects, the memory setting, notes, recoveries,
scratchpads and audit events (SPEC §2). The fields' choices are in choices.py, the notes'
query rules in querysets.py and the records kept about runs (trace, start recall, daily
review, reverts) in run_records.py; all are re-exported here, the one import for callers."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from .choices import (  # noqa: F401 (re-exported)
    REASON_EXPIRED,
    REASON_SUPERSEDED,
    REASON_VETOED,
    Kind,
    ReviewPolicy,
    Role,
    RunStatus,
    Scope,
    Stage,
    Status,
    Target,
    Trust,
)
from .ids import (
    new_agent_id,
    new_item_id,
    new_key_id,
    new_note_id,
    new_read_key,
    new_recovery_id,
    new_run_id,
    new_webhook_id,
)
from .querysets import (  # noqa: F401 (re-exported)
    NOT_READ,
    NoteQuerySet,
    expired_q,
    is_expired,
    last_read_at,
    live_in_place_q,
    not_expired_q,
    not_read_q,
    refusal,
    refused_content_q,
    refused_q,
    vetoed_q,
)
from .run_records import (  # noqa: F401 (re-exported)
    NoteRead,
    ReadTool,
    RecallDay,
    ReviewRoutine,
    ReviewRun,
    RunRevert,
    StartRecall,
    ToolCallCount,
)
from .validation import task_text


class Project(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["slug"]
        permissions = [("memory_manage", "Can manage project memory")]

    def __str__(self) -> str:
        return self.slug


class Application(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="applications")
    slug = models.SlugField(max_length=64)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["project_id", "slug"]
        constraints = [
            models.UniqueConstraint(fields=["project", "slug"], name="application_slug_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.project.slug}/{self.slug}"


class Repository(models.Model):
    """A git repository readable on the server (a bare or working repository's path)."""

    slug = models.SlugField(max_length=64, unique=True)
    path = models.CharField(max_length=1000)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["slug"]
        verbose_name_plural = "repositories"

    def __str__(self) -> str:
        return self.slug


class RepositoryLink(models.Model):
    """An application reads a repository at one pinned commit; re-pinning is audited."""

    application = models.ForeignKey(
        Application, on_delete=models.CASCADE, related_name="repository_links"
    )
    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="links")
    revision = models.CharField(max_length=64)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["application", "repository"], name="repository_link_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.application_id}:{self.repository_id}@{self.revision[:10]}"


def stage_is_eligible(stage: str) -> bool:
    """Whether agents of `stage` are offered memory tools (SPEC §2.1; `MEMORY_ELIGIBLE_STAGES`)."""
    return stage in settings.MEMORY_PORTAL["ELIGIBLE_STAGES"]


class Agent(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=new_agent_id, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="agents")
    # Deleting an application detaches its agents: they, their runs and their private facts
    # stay in the project (SPEC §2.3).
    application = models.ForeignKey(
        Application, null=True, blank=True, on_delete=models.SET_NULL, related_name="agents"
    )
    name = models.CharField(max_length=200)
    stage = models.CharField(max_length=20, choices=Stage.choices)
    created_at = models.DateTimeField(default=timezone.now)
    # A retired agent starts no runs: its keys stop working; its notes and runs stay.
    retired_at = models.DateTimeField(null=True, blank=True)
    # Under a project's `hold` review policy a trusted agent's notes are served to other runs
    # at once, still learned and still in the review queue (SPEC §2.2).
    trusted = models.BooleanField(default=False)

    class Meta:
        ordering = ["project_id", "name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"

    @property
    def is_reviewer(self) -> bool:
        return self.stage == Stage.REVIEW or "reviewer" in self.name.lower()

    @property
    def is_eligible(self) -> bool:
        return stage_is_eligible(self.stage)


class AgentKey(models.Model):
    """A long-lived credential of one agent that only starts runs (SPEC §3.4a): `mpk_<prefix>_
    <secret>`, shown once; only a SHA-256 of the secret is stored (256 random bits need no
    stretching). Revoking it, or retiring its agent, stops it at once."""

    id = models.CharField(primary_key=True, max_length=40, default=new_key_id, editable=False)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="keys")
    label = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(default=timezone.now)
    # The first call made with the key (the Connect page's "last seen" says the connection
    # works), and the latest, to a minute.
    first_used_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.id


class Run(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=new_run_id, editable=False)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="runs")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="runs")
    application = models.ForeignKey(
        Application, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )
    # Text, not a foreign key: a nested run keeps its workflow identity after the top run's row
    # is deleted, and the quota / scratchpad / fingerprint all key on it.
    top_level_run_id = models.CharField(max_length=40, db_index=True)
    status = models.CharField(max_length=12, choices=RunStatus.choices, default=RunStatus.RUNNING)
    task_key = models.CharField(max_length=64, blank=True)
    # What the run is for (POST …/runs {"task": {"title", "description"}}), at most
    # TASK_TEXT_MAX characters together: a start recall without a query scores against it.
    task_title = models.CharField(max_length=2000, blank=True)
    task_description = models.TextField(blank=True)
    # The task's sentence vector, computed once as the run starts (docs/RECALL.md, "Against the
    # task"), as a note's: float16 bytes and the provider that made it.
    task_embedding = models.BinaryField(null=True, blank=True, editable=False)
    task_embedding_model = models.CharField(max_length=120, blank=True, default="", db_default="")
    # The step the orchestrator says the run is in now; every note the run writes records it.
    current_step = models.CharField(max_length=100, blank=True)
    tool_calls = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    # A run an agent key started (POST /api/runs, or an MCP session on /mcp).
    agent_key = models.ForeignKey(
        AgentKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    # The MCP session this run is ("" for any other run), and its latest call: a session idle
    # for MEMORY_PORTAL_MCP_IDLE_MINUTES is finished.
    mcp_session = models.CharField(max_length=64, blank=True, default="")
    last_call_at = models.DateTimeField(null=True, blank=True)
    # The run's key in the read records (ids.new_read_key): what NoteRead.run points at.
    read_key = models.BigIntegerField(unique=True, default=new_read_key, editable=False)

    class Meta:
        ordering = ["-started_at"]
        indexes = [models.Index(fields=["project", "-started_at"], name="run_project_started")]
        constraints = [
            models.UniqueConstraint(
                fields=["mcp_session"],
                condition=~Q(mcp_session=""),
                name="run_mcp_session_unique",
            ),
        ]

    def __str__(self) -> str:
        return self.id

    def save(self, *args, **kwargs):
        if not self.top_level_run_id:
            self.top_level_run_id = self.parent.top_level_run_id if self.parent else self.id
        super().save(*args, **kwargs)

    @property
    def task_text(self) -> str:
        """The task as recall scores it: the title, then the description."""
        return task_text(self.task_title, self.task_description)


class ApiToken(models.Model):
    """A bearer token: `mp_<prefix>_<secret>`. Only a SHA-256 of the secret is stored; the
    secret has 256 random bits, so a fast hash is enough (no password stretching needed)."""

    prefix = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)
    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.CASCADE, related_name="tokens"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="memory_tokens",
    )
    can_write = models.BooleanField(default=True)
    # A person's own name for the token, and when it stops working (never when null).
    label = models.CharField(max_length=100, blank=True, default="")
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(Q(run__isnull=False) & Q(user__isnull=True))
                | (Q(run__isnull=True) & Q(user__isnull=False)),
                name="api_token_run_xor_user",
            ),
        ]

    def __str__(self) -> str:
        return f"tok_{self.prefix}"

    @property
    def scopes(self) -> list[str]:
        return ["read", "write"] if self.can_write else ["read"]


class Membership(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "project"], name="membership_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.user_id}@{self.project_id} ({self.role})"


class MemorySetting(models.Model):
    """One row per project; its row lock serialises every change to the project's memory."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="memory_setting")
    enabled = models.BooleanField(default=False)
    # `hold`: an agent's learned note is served only to its own top-level run until a person
    # reviews it (selectors.visibility, the hold clause).
    review_policy = models.CharField(
        max_length=8, choices=ReviewPolicy.choices, default=ReviewPolicy.OPEN
    )
    revocation_epoch = models.PositiveIntegerField(default=0)
    revision = models.PositiveBigIntegerField(default=0)
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    changed_at = models.DateTimeField(null=True, blank=True)
    last_write_at = models.DateTimeField(null=True, blank=True)
    # The project's notes counted by status, by trust, and learned-and-active (awaiting
    # review): kept exact under this row's lock by every change (counters.py).
    notes_active = models.IntegerField(default=0)
    notes_archived = models.IntegerField(default=0)
    notes_forgotten = models.IntegerField(default=0)
    notes_learned = models.IntegerField(default=0)
    notes_reviewed = models.IntegerField(default=0)
    notes_rejected = models.IntegerField(default=0)
    notes_awaiting = models.IntegerField(default=0)
    # The number of the project's last event (Event.number): advanced under this row's lock,
    # so a project's events are numbered without a gap.
    event_seq = models.PositiveBigIntegerField(default=0)
    # The project's active webhook endpoints, kept by their services under this lock: a change
    # that appends events asks for a delivery only when there is one (no query otherwise).
    webhooks_active = models.PositiveIntegerField(default=0)
    # The people who asked for email alerts of the project's events (NotificationSetting),
    # kept by their service under this lock: a change asks for a pass when there is one.
    alerts_active = models.PositiveIntegerField(default=0)
    # The last day the project's digest was made (services/notifications.py): once a day.
    digest_day = models.DateField(null=True, blank=True)

    # Who listens to the project's events: its active endpoints and the people with alerts. A
    # change that appends events wakes the delivery pass only when someone does.
    LISTENED = Q(webhooks_active__gt=0) | Q(alerts_active__gt=0)

    class Meta:
        db_table = "project_memory_setting"

    def __str__(self) -> str:
        return f"memory of project {self.project_id}"

    @property
    def listeners(self) -> int:
        return self.webhooks_active + self.alerts_active


class Note(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=new_note_id, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="notes")
    application = models.ForeignKey(
        Application, null=True, blank=True, on_delete=models.CASCADE, related_name="notes"
    )
    scope = models.CharField(max_length=12, choices=Scope.choices, default=Scope.PROJECT)
    owner_agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="own_notes"
    )
    kind = models.CharField(max_length=12, choices=Kind.choices)
    target = models.CharField(max_length=10, choices=Target.choices, default=Target.LONG_TERM)
    day = models.DateField(null=True, blank=True)
    content = models.TextField()
    summary = models.CharField(max_length=240, blank=True)
    # Tags are kept as "|a|b|" so one `contains "|a|"` filter works on PostgreSQL and SQLite.
    tags_text = models.CharField(max_length=400, blank=True, default="")
    trust = models.CharField(max_length=10, choices=Trust.choices, default=Trust.LEARNED)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ACTIVE)
    archive_reason = models.CharField(max_length=500, blank=True)
    # Why a person rejected or vetoed the note (optional, one line): shown on the note and to
    # its agent beside `archiveReason`; cleared when the decision is taken back. A database
    # default too: an INSERT that names no column for it (the benchmarks' raw SQL) stores "".
    review_reason = models.CharField(max_length=300, blank=True, default="", db_default="")
    archived_at = models.DateTimeField(null=True, blank=True)
    vetoed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    supersedes = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    expires_at = models.DateTimeField(null=True, blank=True)
    # Provenance, copied as text so it survives the deletion of the agent or run.
    created_by_agent_id = models.CharField(max_length=40, blank=True)
    created_by_stage = models.CharField(max_length=20, blank=True)
    created_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    origin_run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="notes"
    )
    origin_run_ref = models.CharField(max_length=40, blank=True)
    top_level_run_id = models.CharField(max_length=40, blank=True)
    step = models.CharField(max_length=100, blank=True)
    task_key = models.CharField(max_length=64, blank=True)
    # Evidence: the repository and path a writer cited, and the commit the server resolved.
    evidence_repository = models.ForeignKey(
        Repository, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    evidence_path = models.CharField(max_length=1000, blank=True)
    evidence_commit = models.CharField(max_length=64, blank=True)
    evidence_quote = models.TextField(blank=True)
    recall_count = models.PositiveIntegerField(default=0)
    last_recalled_at = models.DateTimeField(null=True, blank=True)
    # Identity of the content in its place (kind, scope, target, day, owner): two active notes
    # never share it. A day row's key is its (agent, date), so it stays put while lines append.
    place_key = models.CharField(max_length=64)
    # The normalised content alone (validation.content_key_text), whatever the kind, place or
    # route: forgotten, rejected or vetoed content is matched on it and never written back.
    content_key = models.CharField(max_length=64, blank=True, default="")
    # The text's sentence embedding for recall (docs/RECALL.md, "Stored vectors"): float16
    # bytes (384 dimensions = 768 bytes for the built-in model), computed before the write's
    # transaction by services/vectors.py; `embedding_model` names the provider that made it, so
    # a model change is detected (and `memory_embed` recomputes). Empty: not computed yet.
    embedding = models.BinaryField(null=True, blank=True, editable=False)
    embedding_model = models.CharField(max_length=120, blank=True, default="", db_default="")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    # The note's key in the read records (ids.new_read_key): what NoteRead.note points at.
    read_key = models.BigIntegerField(unique=True, default=new_read_key, editable=False)

    objects = NoteQuerySet.as_manager()

    class Meta:
        db_table = "project_memory_entry"
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["project", "status", "-created_at"], name="note_project_status"),
            # A project's notes newest first (the notes table, the tools' lists): a page reads
            # its rows from the index instead of sorting every note of the project.
            models.Index(fields=["project", "-created_at", "-id"], name="note_project_created"),
            models.Index(fields=["project", "place_key"], name="note_project_hash"),
            models.Index(fields=["project", "content_key"], name="note_project_content_key"),
            models.Index(fields=["project", "top_level_run_id"], name="note_project_top_run"),
            models.Index(fields=["owner_agent", "kind", "status"], name="note_owner_kind"),
            models.Index(fields=["project", "trust", "created_at"], name="note_project_trust"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "place_key"],
                condition=Q(status="active"),
                name="note_active_identity_unique",
            ),
            models.CheckConstraint(
                condition=Q(target="daily", day__isnull=False)
                | Q(target="long_term", day__isnull=True),
                name="note_day_matches_target",
            ),
        ]

    def __str__(self) -> str:
        return self.id

    @property
    def tags(self) -> list[str]:
        return [t for t in self.tags_text.split("|") if t]

    @property
    def is_vetoed(self) -> bool:
        return self.status == Status.ARCHIVED and self.archive_reason == REASON_VETOED

    @property
    def expired(self) -> bool:
        return is_expired(self.expires_at)

    @property
    def producer_status(self) -> str:
        """The origin run's status, or `unknown` once its row is gone."""
        if self.origin_run_id is None:
            return "unknown" if self.origin_run_ref else "none"
        return self.origin_run.status

    @property
    def lines(self) -> list[str]:
        return self.content.split("\n") if self.content else []


class Recovery(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=new_recovery_id, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="recoveries")
    note = models.OneToOneField(Note, on_delete=models.CASCADE, related_name="recovery")
    previous_status = models.CharField(max_length=10, choices=Status.choices)
    forgotten_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    forgotten_by_agent_id = models.CharField(max_length=40, blank=True)
    forgotten_by_run_id = models.CharField(max_length=40, blank=True)
    forgotten_by_top_level_run_id = models.CharField(max_length=40, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "project_memory_recovery"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.id


class ScratchpadItem(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=new_item_id, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="scratchpad_items")
    top_level_run_id = models.CharField(max_length=40, db_index=True)
    text = models.CharField(max_length=1000)
    done = models.BooleanField(default=False)
    created_by_run_id = models.CharField(max_length=40, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "project_memory_scratchpad"
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return self.id


class AuditEvent(models.Model):
    """Who did what to which note / recovery / project, and when. Never content or queries."""

    project = models.ForeignKey(
        Project, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_events"
    )
    project_ref = models.CharField(max_length=64, blank=True)
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_label = models.CharField(max_length=200, blank=True)
    actor_agent_id = models.CharField(max_length=40, blank=True)
    actor_run_id = models.CharField(max_length=40, blank=True)
    action = models.CharField(max_length=64)
    note_ref = models.CharField(max_length=40, blank=True, db_index=True)
    recovery_ref = models.CharField(max_length=40, blank=True)
    target_ref = models.CharField(max_length=100, blank=True)
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["project", "-created_at"], name="audit_project_created"),
            models.Index(fields=["action", "-created_at"], name="audit_action_created"),
            # The log's keyset pages and its exact actor filters (dashboard audit log).
            models.Index(fields=["-created_at", "-id"], name="audit_created"),
            models.Index(fields=["actor_label", "-created_at"], name="audit_actor_label"),
            models.Index(fields=["actor_agent_id", "-created_at"], name="audit_actor_agent"),
            models.Index(fields=["actor_run_id", "-created_at"], name="audit_actor_run"),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.note_ref or self.target_ref}"


class RunSlot(models.Model):
    """One call of a top-level run in flight, on PostgreSQL (memory/run_slots.py): a row per
    slot taken, deleted when the call ends — or, when its host died or froze mid-call, taken
    over by the next call once `expires_at` has passed. Unlogged: the rows are worth nothing
    after a database restart."""

    pk = models.CompositePrimaryKey("run_id", "slot")
    run_id = models.CharField(max_length=40)
    slot = models.SmallIntegerField()
    expires_at = models.DateTimeField()

    class Meta:
        db_table = "memory_run_slot"

    def __str__(self) -> str:
        return f"{self.run_id}#{self.slot}"


class Event(models.Model):
    """The outbox (SPEC §2.12): one row per change that matters, appended in the transaction
    that makes the change and numbered per project without a gap, for webhooks and digests to
    deliver after commit. Its data holds ids, kinds, trust, agent, run, task key, who acted and
    a dashboard link — never a note's content, summary, tags or a search (memory/outbox.py)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="events")
    number = models.PositiveBigIntegerField()
    type = models.CharField(max_length=40)
    data = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "number"], name="event_project_number")
        ]
        ordering = ["project_id", "number"]

    def __str__(self) -> str:
        return f"{self.type} #{self.number}"


class Webhook(models.Model):
    """A project's webhook endpoint (SPEC §2.12): where its events go, signed the Standard
    Webhooks way or as a chat message. Its secret is kept sealed (memory/webhooks.py), never
    shown after it is made. `cursor`: the number of the last event handed to its deliveries."""

    class Format(models.TextChoices):
        STANDARD = "standard"
        CHAT = "chat"

    id = models.CharField(primary_key=True, max_length=40, default=new_webhook_id, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="webhooks")
    url = models.TextField()
    format = models.CharField(max_length=10, choices=Format.choices, default=Format.STANDARD)
    event_types = models.JSONField(default=list)
    description = models.CharField(max_length=200, blank=True)
    active = models.BooleanField(default=True)
    secret_sealed = models.TextField(blank=True)
    cursor = models.PositiveBigIntegerField(default=0)
    failing_since = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["project_id", "created_at", "id"]

    def __str__(self) -> str:
        return self.id


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"  # waiting for its (next) attempt
    SENDING = "sending"  # leased by a pass; back to due when its lease ends
    DELIVERED = "delivered"
    FAILED = "failed"  # an answer that is no retry, or retried for a day


class Delivery(models.Model):
    """One event for one endpoint, and how its attempts went (services/deliveries.py). A test
    delivery (Send a test event) has no event."""

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.ForeignKey(Event, null=True, blank=True, on_delete=models.CASCADE)
    status = models.CharField(
        max_length=10, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status = models.PositiveIntegerField(default=0)
    last_ms = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=40, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["webhook", "event"], name="delivery_webhook_event")
        ]
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="delivery_due")]
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.webhook_id} {self.event_id} {self.status}"


class NotificationSetting(models.Model):
    """What one person is sent by email about one project (the Notifications page): the daily
    digest, and alerts of the event types in `alerts`. A project without a row for a person
    reads as the defaults of their role (services/notifications.py, `preferences`)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_settings"
    )
    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="notification_settings"
    )
    digest = models.BooleanField(default=False)
    alerts = models.JSONField(default=list)
    # The number of the project's last event the alerts have looked at.
    alert_cursor = models.PositiveBigIntegerField(default=0)
    # The last day a digest of this project was sent to this person.
    digest_day = models.DateField(null=True, blank=True)
    changed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "project"], name="notification_unique"),
        ]

    def __str__(self) -> str:
        return f"notifications of {self.user_id} in {self.project_id}"
