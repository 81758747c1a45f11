"""Normalised content identity (SPEC §2.3): every note gets `content_key`, and `content_hash`
is recomputed over the normalised content, so idempotency and the never-resurrect refusals
see through case, NFKC forms, invisible characters and spacing. Runs record the current step;
an application's agents and runs are detached, not deleted, with it."""

import hashlib
import json
import unicodedata

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


# The rule as it stood when this migration was written (kept here so later changes to the
# application code cannot change what this migration does).
def _key_text(text):
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    visible = "".join(ch for ch in folded if unicodedata.category(ch) != "Cf")
    return " ".join(visible.split())


def _place_hash(note):
    key = json.dumps(
        [
            note.kind,
            note.scope,
            note.target,
            note.day.isoformat() if note.day else "",
            note.application_id or 0,
            note.owner_agent_id or "",
            _key_text(note.content),
        ],
        ensure_ascii=False,
    )
    return hashlib.sha256(key.encode()).hexdigest()


def backfill(apps, schema_editor):
    Note = apps.get_model("memory", "Note")
    taken = set(
        Note.objects.filter(status="active").values_list("project_id", "content_hash")
    )
    batch = []
    fields = ["content_key", "content_hash"]
    notes = Note.objects.order_by("created_at", "id").only(
        "id", "project_id", "application_id", "owner_agent_id", "kind", "scope", "target",
        "day", "content", "content_hash", "status",
    )
    for note in notes.iterator(chunk_size=2000):
        note.content_key = hashlib.sha256(_key_text(note.content).encode()).hexdigest()
        if note.kind != "day":
            new_hash = _place_hash(note)
            if new_hash != note.content_hash:
                if note.status != "active":
                    note.content_hash = new_hash
                elif (note.project_id, new_hash) not in taken:
                    # An older live note that differs only in case or spacing keeps the key;
                    # this one keeps its old key, so no live note is changed or hidden.
                    taken.discard((note.project_id, note.content_hash))
                    taken.add((note.project_id, new_hash))
                    note.content_hash = new_hash
        batch.append(note)
        if len(batch) >= 2000:
            Note.objects.bulk_update(batch, fields)
            batch = []
    if batch:
        Note.objects.bulk_update(batch, fields)


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0004_review_routine'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='note',
            name='content_key',
            field=models.CharField(blank=True, default='', max_length=64),
        ),
        migrations.AddField(
            model_name='run',
            name='current_step',
            field=models.CharField(blank=True, max_length=100),
        ),
        migrations.AlterField(
            model_name='agent',
            name='application',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='agents', to='memory.application'),
        ),
        migrations.AlterField(
            model_name='run',
            name='application',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='runs', to='memory.application'),
        ),
        migrations.AddIndex(
            model_name='note',
            index=models.Index(fields=['project', 'content_key'], name='note_project_content_key'),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
