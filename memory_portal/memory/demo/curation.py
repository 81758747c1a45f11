"""What agents and people do with the demo's notes after writing them: tidy, review, veto,
forget, restore, expire; then the runs finish and legacy-erp is switched off."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from memory_portal.memory import services
from memory_portal.memory.actors import Actor
from memory_portal.memory.demo.scenario import TRACE_V1_ARCHIVE
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.models import Note, Recovery, Run, RunStatus

if TYPE_CHECKING:
    from memory_portal.memory.demo.state import NoteMeta, ProjectState


class Curation:
    """Part of DemoLoader (its clock, services and simulated times)."""

    def later_run(self, state: ProjectState, meta: NoteMeta) -> Run | None:
        """A later run of the same agent, for agent actions on its own notes."""
        candidates = [
            r
            for r in state.runs
            if r.agent_id == meta.run.agent_id and self.run_times[r.pk][0] > meta.when
        ]
        return candidates[0] if candidates else None

    def person_time(self, meta: NoteMeta, limit: datetime | None) -> datetime:
        delay = timedelta(hours=self.rng.randint(2, 72), minutes=self.rng.randint(0, 59))
        when = self.clamp(meta.when + delay, limit)
        return max(when, meta.when + timedelta(minutes=1))

    def curate(self, state: ProjectState, limit: datetime | None) -> None:
        """What agents and people did with the notes afterwards."""
        rng = self.rng
        spec = state.spec
        candidates = [m for m in state.pool_notes if not m.evidence and m.when < self.midnight]
        rng.shuffle(candidates)
        total = len(candidates)

        def take(count: int) -> list[NoteMeta]:
            taken = candidates[:count]
            del candidates[:count]
            return taken

        # Agents tidy their own notes in a later run: archive with a reason, or forget.
        agent_archive, agent_forget = [], []
        for meta in list(candidates):
            if len(agent_archive) >= 2 and len(agent_forget) >= (3 if total > 50 else 1):
                break
            run = self.later_run(state, meta)
            if run is None:
                continue
            candidates.remove(meta)
            (agent_archive if len(agent_archive) < 2 else agent_forget).append((meta, run))
        reasons = self.scenario.agent_archive_reasons
        for index, (meta, run) in enumerate(agent_archive):
            when = self.clamp(self.run_times[run.pk][0] + timedelta(minutes=4))
            self.at(when)
            services.note_archive(
                actor=Actor.agent_run(run),
                note_id=meta.pk,
                reason=reasons[index % len(reasons)],
            )
            self.trace(run, TRACE_V1_ARCHIVE, when)
            self.touch(meta.pk, when, archived=True)
        agent_recoveries = []
        for meta, run in agent_forget:
            when = self.clamp(self.run_times[run.pk][0] + timedelta(minutes=6))
            self.at(when)
            recovery = services.note_forget(actor=Actor.agent_run(run), note_id=meta.pk)
            self.trace(run, "forget", when)
            self.touch(meta.pk, when)
            self.recovery_times[recovery.pk] = when
            agent_recoveries.append((recovery, run, when))

        # People: approve, reject, veto, archive, forget, edit.
        approved = take(round(total * 0.32))
        rejected = take(max(2, round(total * 0.045)))
        vetoed = take(max(1, round(total * 0.035)))
        archived = take(max(1, round(total * 0.025)))
        forgotten = take(max(2, round(total * 0.03)))
        edited = take(spec.edits)
        plain_facts = [m for m in state.facts if not m.expiring]
        approved += plain_facts[:3] + state.evidence_notes[:2]

        def act(meta: NoteMeta, service, **kwargs):
            when = self.person_time(meta, limit)
            self.at(when)
            result = service(actor=self.as_demo, note_id=meta.pk, **kwargs)
            return when, result

        for meta in approved:
            when, _ = act(meta, services.note_approve)
            self.touch(meta.pk, when)
        for meta in rejected:
            when, _ = act(meta, services.note_reject)
            self.touch(meta.pk, when)
        for meta in vetoed:
            when, _ = act(meta, services.note_veto)
            self.touch(meta.pk, when, archived=True)
        reasons = self.scenario.person_archive_reasons
        for index, meta in enumerate(archived):
            reason = reasons[index % len(reasons)]
            when, _ = act(meta, services.note_archive, reason=reason)
            self.touch(meta.pk, when, archived=True)
        manager_recoveries = []
        for meta in forgotten:
            when, recovery = act(meta, services.note_forget)
            self.touch(meta.pk, when)
            self.recovery_times[recovery.pk] = when
            manager_recoveries.append((recovery, meta, when))
        for meta in edited:
            when = self.person_time(meta, limit)
            note = Note.objects.only("content").get(pk=meta.pk)
            content = (
                f"{note.content} Checked by {self.demo.get_username()} in review on "
                f"{when:%d %b}: still accurate."
            )
            self.at(when)
            result = services.note_edit(actor=self.as_demo, note_id=meta.pk, content=content)
            self.touch(result.note.pk, when)
            self.touch(meta.pk, when, archived=True)

        # A reviewed note is later forgotten by a manager (agents cannot: trust-locked).
        if approved and spec.slug == "acme-web":
            meta = approved[0]
            when = self.clamp(self.note_times[meta.pk]["updated_at"] + timedelta(days=1), limit)
            self.at(when)
            recovery = services.note_forget(actor=self.as_demo, note_id=meta.pk)
            self.touch(meta.pk, when)
            self.recovery_times[recovery.pk] = when
            # An agent that tries the same on another reviewed note is refused.
            other = next((m for m in approved[1:] if not m.v1 and not m.evidence), None)
            runner = other and self.later_run(state, other)
            if runner is not None:
                try:
                    services.note_forget(actor=Actor.agent_run(runner), note_id=other.pk)
                except MemoryPortalError as error:
                    self.trace(runner, "forget", self.run_times[runner.pk][0], error.code)

        # One veto is undone by a person, and one forgotten note is restored.
        if spec.slug == "acme-web" and candidates:
            meta = candidates.pop(0)
            when, _ = act(meta, services.note_veto)
            self.touch(meta.pk, when, archived=True)
            undo = self.clamp(when + timedelta(hours=2), limit)
            self.at(undo)
            services.note_undo(actor=self.as_demo, note_id=meta.pk)
            self.note_times[meta.pk]["updated_at"] = undo
            self.note_times[meta.pk].pop("archived_at", None)
        if manager_recoveries and spec.slug == "acme-web":
            recovery, meta, forgot = manager_recoveries[-1]
            when = self.clamp(forgot + timedelta(hours=20), limit)
            self.at(when)
            services.note_restore(actor=self.as_demo, recovery_id=recovery.pk)
            self.touch(meta.pk, when)
        if agent_recoveries and spec.slug == "payments-core":
            # An agent restores its own forgotten note in a later run ("also in later runs").
            recovery, run, forgot = agent_recoveries[0]
            later = next(
                (
                    r
                    for r in state.runs
                    if r.agent_id == run.agent_id and self.run_times[r.pk][0] > forgot
                ),
                None,
            )
            if later is not None:
                when = self.clamp(self.run_times[later.pk][0] + timedelta(minutes=8))
                self.at(when)
                note = services.note_restore(actor=Actor.agent_run(later), recovery_id=recovery.pk)
                self.trace(later, "restore", when)
                self.touch(note.pk, when)

        # Facts: one rejected, one vetoed, one forgotten by a manager.
        for meta, service in zip(
            plain_facts[3:],
            (services.note_reject, services.note_veto, services.note_forget),
            strict=False,
        ):
            when, result = act(meta, service)
            self.touch(meta.pk, when, archived=service is services.note_veto)
            if isinstance(result, Recovery):
                self.recovery_times[result.pk] = when

    def expire(self, state: ProjectState) -> None:
        """Some facts have run past their expiry date (back-dated; services refuse past dates)."""
        chosen = [m for m in state.facts if m.expiring]
        chosen += [m for m in state.pool_notes if m.expiring and m.when < self.past(8)][:1]
        for meta in chosen:
            created = self.note_times[meta.pk]["created_at"]
            span = min(timedelta(days=14), (self.now - created) * 0.6)
            self.note_times[meta.pk]["expires_at"] = created + span

    def finish_runs(self, state: ProjectState) -> None:
        # Children finish before their parents; running runs stay open.
        for run in reversed(state.runs):
            start, _end, status = self.run_times[run.pk]
            if status == RunStatus.RUNNING:
                continue
            end = max(
                [self.run_last.get(run.pk, start)]
                + [self.run_times[c.pk][1] or start for c in state.runs if c.parent_id == run.pk]
            )
            end = self.clamp(end + timedelta(minutes=self.rng.randint(3, 15)))
            self.run_times[run.pk][1] = end
            self.at(end)
            services.run_update(actor=None, run=run, status=status)

    def finish_legacy(self, state: ProjectState) -> None:
        """Re-pin the link to the second commit (evidence goes stale), re-verify one note whose
        file did not change, then switch memory off."""
        app = state.apps[state.spec.repo_link_app]
        when = self.past(6, 10)
        self.at(when)
        link = services.repository_link_set(
            actor=None, application=app, repository=self.repository, revision=self.commits[1]
        )
        self.context_times.append((link, "updated_at", when))
        ci_note = Note.objects.filter(
            pk__in=[m.pk for m in state.evidence_notes], evidence_path="config/ci.yml"
        ).first()
        if ci_note is not None:
            when = self.past(5, 14)
            self.at(when)
            services.note_reverify(actor=self.as_demo, note_id=ci_note.pk)
            self.touch(ci_note.pk, when)
        when = self.past(4, 9, 15)
        self.at(when)
        services.memory_disable(actor=self.as_demo, project=state.project)
        self.setting_times[state.project.pk] = when
