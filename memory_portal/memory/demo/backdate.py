"""Back-dating for the demo: the services stamp everything "now"; the loader's simulated clock
is applied afterwards in bulk."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Max

from memory_portal.memory.models import (
    AuditEvent,
    MemorySetting,
    Note,
    Project,
    Recovery,
    Run,
    ScratchpadItem,
    ToolCallCount,
)


def set_columns(model, fields: list[str], rows: list[tuple]) -> None:
    """Back-dating in bulk: `rows` are (value…, pk). One prepared UPDATE run with executemany is
    much faster than bulk_update's CASE expressions over hundreds of rows."""
    if not rows:
        return
    meta = model._meta
    qn = connection.ops.quote_name
    columns = ", ".join(f"{qn(meta.get_field(f).column)} = %s" for f in fields)
    sql = f"UPDATE {qn(meta.db_table)} SET {columns} WHERE {qn(meta.pk.column)} = %s"
    adapt = connection.ops.adapt_datetimefield_value
    params = [[adapt(v) for v in row[:-1]] + [row[-1]] for row in rows]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


class Backdating:
    """Part of DemoLoader: applies its simulated times."""

    def backdate(self, projects: list[Project]) -> None:
        """Back-dating for realism, the only direct model writes of the demo: the services stamp
        everything "now"; this spreads notes, audit events, runs, recoveries, scratchpad items
        and context objects over the last month, by the simulated clock kept above."""
        marks = self.audit_marks
        rows, mark = [], 0
        if marks:
            events = AuditEvent.objects.filter(pk__gt=marks[0][0]).order_by("pk")
            for pk in events.values_list("pk", flat=True):
                # Event ids grow with time: an event belongs to the last mark below its id.
                while mark + 1 < len(marks) and marks[mark + 1][0] < pk:
                    mark += 1
                rows.append((marks[mark][1], pk))
        set_columns(AuditEvent, ["created_at"], rows)

        rows = []
        default_days = timedelta(days=settings.MEMORY_PORTAL["FACT_DEFAULT_EXPIRY_DAYS"])
        for pk, archived_at, expires_at in Note.objects.filter(
            pk__in=list(self.note_times)
        ).values_list("pk", "archived_at", "expires_at"):
            times = self.note_times[pk]
            created = times["created_at"]
            updated = times.get("updated_at", created)
            if archived_at is not None:
                archived_at = times.get("archived_at", updated)
            if "expires_at" in times:
                expires_at = times["expires_at"]
            elif pk in self.default_expiry and expires_at is not None:
                expires_at = created + default_days
            rows.append((created, updated, archived_at, expires_at, pk))
        set_columns(Note, ["created_at", "updated_at", "archived_at", "expires_at"], rows)

        runs = list(Run.objects.filter(pk__in=self.run_times))
        for run in runs:
            run.started_at, run.finished_at, _status = self.run_times[run.pk]
        Run.objects.bulk_update(runs, ["started_at", "finished_at"], batch_size=300)
        counts = list(ToolCallCount.objects.filter(run__in=runs))
        for count in counts:
            count.last_called_at = self.run_last.get(count.run_id, count.last_called_at)
        ToolCallCount.objects.bulk_update(counts, ["last_called_at"], batch_size=300)

        recoveries = list(Recovery.objects.filter(pk__in=self.recovery_times))
        for recovery in recoveries:
            recovery.created_at = self.recovery_times[recovery.pk]
        Recovery.objects.bulk_update(recoveries, ["created_at"])

        items = list(ScratchpadItem.objects.filter(project__in=projects))
        for item in items:
            item.created_at = self.item_times.get(item.pk, item.created_at)
            item.updated_at = self.item_times.get(item.pk + ":done", item.created_at)
        ScratchpadItem.objects.bulk_update(items, ["created_at", "updated_at"])

        for obj, field_name, when in self.context_times:
            type(obj).objects.filter(pk=obj.pk).update(**{field_name: when})
        for project in projects:
            last_write = self.latest_write(project)
            MemorySetting.objects.filter(project=project).update(
                changed_at=self.setting_times.get(project.pk), last_write_at=last_write
            )

    def latest_write(self, project: Project) -> datetime | None:
        return Note.objects.filter(project=project).aggregate(last=Max("created_at"))["last"]
