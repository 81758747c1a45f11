"""`notes_awaiting` counts what the review queue's first section lists: learned, active notes
that are not day logs (it counted day logs too, so the header said more than the queue)."""

from django.db import migrations
from django.db.models import Count, IntegerField, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce


def _recount(apps, *, with_day_logs: bool):
    MemorySetting = apps.get_model("memory", "MemorySetting")
    Note = apps.get_model("memory", "Note")
    awaiting = Note.objects.filter(project=OuterRef("project"), status="active", trust="learned")
    if not with_day_logs:
        awaiting = awaiting.exclude(kind="day")
    counted = awaiting.order_by().values("project").annotate(n=Count("pk")).values("n")
    MemorySetting.objects.update(
        notes_awaiting=Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))
    )


def recount(apps, schema_editor):
    _recount(apps, with_day_logs=False)


def recount_with_day_logs(apps, schema_editor):
    _recount(apps, with_day_logs=True)


class Migration(migrations.Migration):
    dependencies = [("memory", "0022_compact_reads")]

    operations = [migrations.RunPython(recount, recount_with_day_logs)]
