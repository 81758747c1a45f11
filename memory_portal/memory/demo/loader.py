"""The demo loader: plays the scenarios through the services, keeping a simulated clock."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.db.models import Max

from memory_portal.memory import services
from memory_portal.memory.actors import Actor
from memory_portal.memory.demo.backdate import Backdating
from memory_portal.memory.demo.curation import Curation
from memory_portal.memory.demo.scenario import (
    TRACE_V1_DAY,
    TRACE_V1_SAVE,
    NoteText,
    ProjectSpec,
    Scenario,
    Workflow,
    build_pool,
    build_repository,
)
from memory_portal.memory.demo.state import NoteMeta, ProjectState
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.models import (
    AuditEvent,
    Kind,
    Note,
    Project,
    ReadTool,
    Repository,
    Role,
    Run,
    RunStatus,
    Scope,
    Stage,
    Target,
)

VIEWER_USER = "viewer"
DISABLED_PROJECT = "legacy-erp"


class DemoLoader(Curation, Backdating):
    """Builds the demo through the services, keeping a simulated clock per action; at the end it
    back-dates timestamps to that clock so the demo spans the last month."""

    def __init__(
        self, *, now: datetime, repo_dir: Path, demo, scenario: Scenario, rng: random.Random
    ):
        self.now = now
        self.midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
        self.repo_dir = repo_dir
        self.demo = demo
        self.as_demo = Actor.person(demo)
        self.scenario = scenario
        self.rng = rng
        # Simulated times, applied in bulk by backdate().
        self.audit_marks: list[tuple[int, datetime]] = []
        self.note_times: dict[str, dict[str, datetime]] = {}
        self.default_expiry: set[str] = set()
        self.run_times: dict[str, list] = {}
        self.run_last: dict[str, datetime] = {}
        self.recovery_times: dict[str, datetime] = {}
        self.item_times: dict[str, datetime] = {}
        self.context_times: list[tuple[object, str, datetime]] = []
        self.setting_times: dict[int, datetime] = {}
        self.repository: Repository | None = None
        self.pool_rest: list[NoteText] = []
        self.commits: tuple[str, str] = ("", "")

    # -- simulated clock --

    def past(self, days: float, hour: int = 9, minute: int = 0) -> datetime:
        day = self.midnight - timedelta(days=int(days))
        return day.replace(hour=hour, minute=minute)

    def today_at(self, fraction: float) -> datetime:
        # Today's runs sit in the last two hours: day_append stamps each line with the real
        # clock's HH:MM, and the rows' times should not contradict their lines much.
        start = max(self.midnight, self.now - timedelta(hours=2))
        return start + (self.now - start) * fraction

    def clamp(self, when: datetime, limit: datetime | None = None) -> datetime:
        latest = min(limit or self.now, self.now) - timedelta(minutes=1)
        return min(when, latest)

    def at(self, when: datetime) -> None:
        """The audit events the next service call writes happened at `when`. Services insert
        their own audit rows (with plain SQL, so no signal tells), hence the id mark."""
        last = AuditEvent.objects.aggregate(last=Max("pk"))["last"] or 0
        self.audit_marks.append((last, when))

    def touch(self, pk: str, when: datetime, *, archived: bool = False) -> None:
        times = self.note_times.setdefault(pk, {"created_at": when})
        times["updated_at"] = max(when, times["created_at"])
        if archived:
            times["archived_at"] = times["updated_at"]

    def trace(self, run: Run, tool: str, when: datetime, outcome: str = "ok") -> None:
        services.run_call_consume(run=run)
        services.tool_call_record(run=run, tool=tool, outcome=outcome)
        self.run_last[run.pk] = max(when, self.run_last.get(run.pk, when))

    # -- setup --

    def setup_project(self, spec: ProjectSpec, index: int) -> ProjectState:
        created = self.past(33 - index, 9)
        self.at(created)
        project = services.project_create(actor=None, slug=spec.slug, name=spec.name)
        self.context_times.append((project, "created_at", created))
        state = ProjectState(spec=spec, project=project)
        for offset, (slug, name) in enumerate(spec.apps):
            when = created + timedelta(minutes=10 + offset)
            self.at(when)
            app = services.application_create(actor=None, project=project, slug=slug, name=name)
            self.context_times.append((app, "created_at", when))
            state.apps[slug] = app
        when = created + timedelta(minutes=20)
        self.at(when)
        services.membership_set(actor=None, project=project, user=self.demo, role=Role.MANAGER)
        for offset, (stage, name, app_slug) in enumerate(spec.agents):
            when = created + timedelta(hours=2, minutes=offset * 7)
            self.at(when)
            agent = services.agent_create(
                actor=None,
                project=project,
                name=name,
                stage=stage,
                application=state.apps[app_slug],
            )
            self.context_times.append((agent, "created_at", when))
            state.agents[stage] = agent
        when = self.past(spec.enabled_days_ago, 8, 30)
        self.at(when)
        services.memory_enable(actor=self.as_demo, project=project)
        self.setting_times[project.pk] = when
        if spec.repo_link_app:
            self.link_repository(state, when + timedelta(minutes=20))
        return state

    def link_repository(self, state: ProjectState, when: datetime) -> None:
        if self.repository is None:
            self.at(when)
            self.repository = services.repository_create(
                actor=None, slug=self.scenario.repo_slug, path=str(self.repo_dir)
            )
            self.context_times.append((self.repository, "created_at", when))
        self.at(when)
        link = services.repository_link_set(
            actor=None,
            application=state.apps[state.spec.repo_link_app],
            repository=self.repository,
            revision=self.commits[0],
        )
        self.context_times.append((link, "updated_at", when))

    # -- runs and writes --

    def start_runs(self, state: ProjectState, workflow: Workflow, base: datetime) -> list[Run]:
        runs: list[Run] = []
        for position, (stage, parent_index, status) in enumerate(workflow.runs):
            # Clamped: a few minutes after midnight, today's window is shorter than the steps.
            when = self.clamp(base + timedelta(minutes=9 * position))
            parent = runs[parent_index] if parent_index is not None else None
            self.at(when)
            run = services.run_create(
                actor=None, agent=state.agents[stage], parent=parent, task_key=workflow.task_key
            )
            self.run_times[run.pk] = [when, None, status]
            self.run_last[run.pk] = when
            runs.append(run)
            state.runs.append(run)
        return runs

    def write(
        self,
        state: ProjectState,
        run: Run,
        when: datetime,
        text: NoteText,
        *,
        daily: bool = False,
        evidence: dict | None = None,
        expires_at: datetime | None = None,
    ) -> NoteMeta:
        rng = self.rng
        scope = Scope.APPLICATION if evidence or rng.random() < 0.4 else Scope.PROJECT
        tags = list(text.tags)
        if rng.random() < 0.5:
            tags.append(rng.choice(self.scenario.extra_tags.get(text.category, ("notes",))))
        if scope == Scope.APPLICATION:
            tags.append(run.application.slug)
        self.at(when)
        # The orchestrator reports the step before the agent writes in it.
        step = rng.choice(self.scenario.steps)
        if run.current_step != step:
            run.current_step = services.run_update(actor=None, run=run, step=step).current_step
        result = services.note_write(
            actor=Actor.agent_run(run),
            kind=text.kind,
            content=text.content,
            target=Target.DAILY if daily else Target.LONG_TERM,
            scope=scope,
            summary=(text.summary or None) if rng.random() < 0.8 else None,
            tags=tags if rng.random() < 0.9 else None,
            day=when.date() if daily else None,
            evidence=evidence,
            expires_at=expires_at,
        )
        self.trace(run, "write", when)
        if not result.created:
            raise CommandError(f"Demo note text is not unique: {text.content[:60]}")
        self.touch(result.note.pk, when)
        return NoteMeta(
            pk=result.note.pk,
            when=when,
            run=run,
            kind=text.kind,
            evidence=evidence is not None,
        )

    def save_fact(
        self, run: Run, when: datetime, text: str, *, expires_in: int | None = None
    ) -> NoteMeta:
        self.at(when)
        expires_at = self.now + timedelta(days=expires_in) if expires_in else None
        result = services.fact_save(actor=Actor.agent_run(run), text=text, expires_at=expires_at)
        self.trace(run, TRACE_V1_SAVE, when)
        self.touch(result.note.pk, when)
        if expires_in is None:
            self.default_expiry.add(result.note.pk)
        return NoteMeta(
            pk=result.note.pk,
            when=when,
            run=run,
            kind=Kind.FACT,
            v1=True,
            expiring=expires_in is not None,
        )

    def run_past(self, state: ProjectState, pool: list[NoteText]) -> None:
        spec = state.spec
        workflows = [(w, self.past(w.when, w.hour, self.rng.randrange(0, 50))) for w in spec.past]
        writer_runs: list[tuple[Run, datetime, Workflow]] = []
        for workflow, base in workflows:
            runs = self.start_runs(state, workflow, base)
            for run in runs:
                agent = run.agent
                if agent.is_eligible and not agent.is_reviewer:
                    writer_runs.append((run, self.run_times[run.pk][0], workflow))
        clock = {run.pk: start + timedelta(minutes=2) for run, start, _ in writer_runs}

        def next_time(run: Run) -> datetime:
            when = clock[run.pk]
            clock[run.pk] = when + timedelta(minutes=self.rng.randint(2, 6))
            return when

        # Evidence first: the repository is linked at its first commit now.
        for run, _start, workflow in writer_runs:
            if not workflow.evidence or run.agent.stage != Stage.UNDERSTAND:
                continue
            for note in spec.evidence_notes:
                evidence = {"repositoryId": self.scenario.repo_slug, "path": note.path}
                if note.quote:
                    evidence["quote"] = note.quote
                text = NoteText(note.kind, note.content, "", ("evidence", "legacy-main"), "layout")
                meta = self.write(state, run, next_time(run), text, evidence=evidence)
                state.evidence_notes.append(meta)
            break

        # Pool notes round-robin over the writing runs; a few facts get an explicit expiry.
        expiring_left = 3
        for index, text in enumerate(pool[: spec.pool_notes]):
            run, _start, _workflow = writer_runs[index % len(writer_runs)]
            when = next_time(run)
            expires_at = None
            if text.kind == Kind.FACT and expiring_left and self.rng.random() < 0.3:
                expiring_left -= 1
                expires_at = self.now + timedelta(days=self.rng.randint(20, 80))
            meta = self.write(
                state,
                run,
                when,
                text,
                daily=self.rng.random() < 0.15,
                expires_at=expires_at,
            )
            meta.expiring = expires_at is not None
            state.pool_notes.append(meta)

        # Private v1 facts of the agents, saved in their own runs.
        for index, text in enumerate(spec.facts):
            run, _start, _workflow = writer_runs[(index * 3 + 1) % len(writer_runs)]
            state.facts.append(self.save_fact(run, next_time(run), text))
        for index, text in enumerate(spec.expiring_facts):
            run, _start, _workflow = writer_runs[index]
            state.facts.append(self.save_fact(run, next_time(run), text, expires_in=21))

        # Fact revisions: saved in the agent's first run, superseded in its last past run.
        for stage, old_text, new_text in spec.fact_revisions:
            own = [(r, s) for r, s, _w in writer_runs if r.agent.stage == stage]
            first, last = own[0][0], own[-1][0]
            old = self.save_fact(first, next_time(first), old_text)
            when = next_time(last)
            self.at(when)
            result = services.fact_save(
                actor=Actor.agent_run(last), text=new_text, supersedes=old.pk
            )
            self.trace(last, TRACE_V1_SAVE, when)
            self.touch(result.note.pk, when)
            self.default_expiry.add(result.note.pk)
            self.touch(old.pk, when, archived=True)

        # A person saves a fact for an agent (v1 with agentId).
        stage, text = spec.person_fact
        when = self.past(9, 12, 5)
        self.at(when)
        result = services.fact_save(actor=self.as_demo, text=text, agent_id=state.agents[stage].pk)
        self.touch(result.note.pk, when)
        self.default_expiry.add(result.note.pk)

        # Recalls: each writing run, as it starts, is served a few notes written before it
        # (marked by the service a recall marks its picks with; the overview counts them) and
        # recorded as read by that run, as the start-of-run recall records them.
        written = sorted(state.pool_notes + state.facts, key=lambda meta: meta.when)
        trust = dict(Note.objects.filter(project=state.project).values_list("pk", "trust"))
        for run, start, _workflow in writer_runs:
            earlier = [meta.pk for meta in written if meta.when < start]
            if earlier:
                picks = self.rng.sample(earlier, min(len(earlier), self.rng.randint(1, 3)))
                services.notes_mark_recalled(project=state.project, note_ids=picks, now=start)
                services.reads_record(
                    actor=Actor.agent_run(run),
                    tool=ReadTool.START_RECALL,
                    served=[(pk, trust[pk], None) for pk in picks],
                    now=start,
                )

        # A finished workflow keeps its scratchpad: every item done.
        if spec.scratchpad:
            run, _start, _workflow = writer_runs[-1]
            for text in spec.scratchpad[:3]:
                self.scratch(run, next_time(run), text, done_after=timedelta(minutes=25))

        self.pool_rest = pool[spec.pool_notes :]

    def scratch(
        self, run: Run, when: datetime, text: str, *, done_after: timedelta | None = None
    ) -> None:
        actor = Actor.agent_run(run)
        self.at(when)
        item = services.scratchpad_add(actor=actor, text=text)
        self.trace(run, "scratchpad", when)
        self.item_times[item.pk] = when
        if done_after is not None:
            done = self.clamp(when + done_after)
            self.at(done)
            services.scratchpad_done(actor=actor, item_id=item.pk)
            self.trace(run, "scratchpad", done)
            self.item_times[item.pk + ":done"] = done

    def run_today(self, state: ProjectState) -> None:
        spec = state.spec
        lines = list(spec.day_lines)
        line_index = 0
        daily_left = 2
        for workflow in spec.today:
            base = self.today_at(workflow.when)
            runs = self.start_runs(state, workflow, base)
            for run in runs:
                when = self.clamp(self.run_times[run.pk][0] + timedelta(minutes=1))
                actor = Actor.agent_run(run)
                agent = run.agent
                if not agent.is_eligible or agent.is_reviewer:
                    # Ineligible and reviewer agents are refused writes; the trace shows it.
                    self.refused_write(run, when)
                    continue
                for _ in range(self.rng.randint(3, 5)):
                    when = self.clamp(when + timedelta(minutes=self.rng.randint(3, 12)))
                    self.at(when)
                    row = services.day_append(actor=actor, line=lines[line_index % len(lines)])
                    line_index += 1
                    self.trace(run, TRACE_V1_DAY, when)
                    self.touch(row.pk, when)
                if daily_left and self.pool_rest:
                    daily_left -= 1
                    state.pool_notes.append(
                        self.write(state, run, when, self.pool_rest.pop(), daily=True)
                    )
            top = runs[0]
            live = workflow.runs[0][2] == RunStatus.RUNNING
            if live and spec.scratchpad and not top.agent.is_reviewer:
                # The live workflow's shared scratchpad: the top run and a nested step add items.
                writer = next(
                    (r for r in runs[1:] if r.agent.is_eligible and not r.agent.is_reviewer), top
                )
                for index, text in enumerate(spec.scratchpad):
                    when = self.clamp(self.run_times[top.pk][0] + timedelta(minutes=3 + index))
                    by = writer if index == len(spec.scratchpad) - 1 else top
                    done = timedelta(minutes=15) if index < 2 else None
                    self.scratch(by, when, text, done_after=done)

    def refused_write(self, run: Run, when: datetime) -> None:
        text = f"{run.agent.name} tried to write a note during {run.task_key or 'a run'}."
        try:
            services.note_write(actor=Actor.agent_run(run), kind=Kind.FACT, content=text)
        except MemoryPortalError as error:
            self.trace(run, "write", when, outcome=error.code)
        else:
            raise CommandError(f"{run.agent.name} was allowed to write; the demo expects not.")

    # -- everything --

    def load(self, progress=None) -> list[Project]:
        """`progress` (memory.progress.Progress): one step a project, and the back-dating."""
        self.commits = build_repository(self.repo_dir, self.scenario)
        states = []
        for index, spec in enumerate(self.scenario.projects):
            state = self.setup_project(spec, index)
            if spec.slug == "acme-web":
                viewer = get_user_model().objects.get(username=VIEWER_USER)
                self.at(self.past(20, 11))
                services.membership_set(
                    actor=None, project=state.project, user=viewer, role=Role.MEMBER
                )
            pool = build_pool(self.scenario, spec, self.rng)
            if len(pool) < spec.pool_notes + 2:
                raise CommandError(f"Not enough demo text for {spec.slug}.")
            self.run_past(state, pool)
            self.run_today(state)
            limit = self.past(4, 9) if spec.slug == DISABLED_PROJECT else None
            self.curate(state, limit)
            self.expire(state)
            self.finish_runs(state)
            if spec.slug == DISABLED_PROJECT:
                self.finish_legacy(state)
            states.append(state)
            if progress is not None:
                progress.update()
        projects = [s.project for s in states]
        self.backdate(projects)
        if progress is not None:
            progress.update()
        return projects


# --- The command ----------------------------------------------------------------------------
