"""Stored per-project note counters on the setting row (memory/counters.py), backfilled from a
count of every project's notes by status and trust."""

from django.db import migrations, models
from django.db.models import Count

STATUS_FIELDS = {
    "active": "notes_active",
    "archived": "notes_archived",
    "forgotten": "notes_forgotten",
}
TRUST_FIELDS = {
    "learned": "notes_learned",
    "reviewed": "notes_reviewed",
    "rejected": "notes_rejected",
}
FIELDS = [*STATUS_FIELDS.values(), *TRUST_FIELDS.values(), "notes_awaiting"]


def backfill(apps, schema_editor):
    MemorySetting = apps.get_model("memory", "MemorySetting")
    Note = apps.get_model("memory", "Note")
    counts: dict[int, dict[str, int]] = {}
    rows = (
        Note.objects.order_by().values_list("project_id", "status", "trust").annotate(n=Count("pk"))
    )
    for project_id, status, trust, n in rows:
        values = counts.setdefault(project_id, dict.fromkeys(FIELDS, 0))
        values[STATUS_FIELDS[status]] += n
        values[TRUST_FIELDS[trust]] += n
        if (status, trust) == ("active", "learned"):
            values["notes_awaiting"] += n
    settings = list(MemorySetting.objects.filter(project_id__in=counts))
    for setting in settings:
        for field, value in counts[setting.project_id].items():
            setattr(setting, field, value)
    MemorySetting.objects.bulk_update(settings, FIELDS, batch_size=500)


class Migration(migrations.Migration):
    dependencies = [("memory", "0009_perf_audit_indexes")]

    operations = [
        *(
            migrations.AddField(
                model_name="memorysetting", name=name, field=models.IntegerField(default=0)
            )
            for name in FIELDS
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
