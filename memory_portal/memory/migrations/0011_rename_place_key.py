"""The note's place identity was stored as `content_hash`, beside `content_key`, the hash of its
normalised content: `place_key` says what it holds. The column is renamed in place (its index
and the unique constraint of live notes follow it in the database); the model state's index and
constraint are restated on the new name."""

from django.db import migrations, models
from django.db.models import Q


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0010_project_counters"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RenameField(
                    model_name="note", old_name="content_hash", new_name="place_key"
                ),
            ],
            state_operations=[
                migrations.RenameField(
                    model_name="note", old_name="content_hash", new_name="place_key"
                ),
                migrations.RemoveIndex(model_name="note", name="note_project_hash"),
                migrations.AddIndex(
                    model_name="note",
                    index=models.Index(fields=["project", "place_key"], name="note_project_hash"),
                ),
                migrations.RemoveConstraint(model_name="note", name="note_active_identity_unique"),
                migrations.AddConstraint(
                    model_name="note",
                    constraint=models.UniqueConstraint(
                        fields=["project", "place_key"],
                        condition=Q(status="active"),
                        name="note_active_identity_unique",
                    ),
                ),
            ],
        ),
    ]
