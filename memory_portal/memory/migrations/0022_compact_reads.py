"""Read records made small (docs/CONCEPTS.md, "Read records"): notes and runs get an eight-byte
`read_key`, and the read table is rebuilt around it — the note and the run by key, the tool and
the trust as two-byte codes, no padding, a note's index newest first and a run's deduplicated,
no primary key constraint on PostgreSQL, and a BRIN index on `read_at` for retention (a plain
one on SQLite). The records kept are copied over; going back copies them back."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

import memory_portal.memory.ids
import memory_portal.memory.run_records

TOOLS = ("read", "search", "recall", "start_recall", "list")
TRUSTS = ("learned", "reviewed", "rejected")
OLD, NEW = "project_memory_read_v1", "project_memory_read"
NOTES, RUNS = "project_memory_entry", "memory_run"


def new_key() -> int:
    return memory_portal.memory.ids.new_read_key()


def fill_keys(apps, schema_editor):
    """A key for every note and run there is, a thousand rows a statement."""
    for name in ("Note", "Run"):
        model = apps.get_model("memory", name)
        ids = list(model.objects.filter(read_key__isnull=True).values_list("pk", flat=True))
        for start in range(0, len(ids), 1000):
            batch = ids[start : start + 1000]
            whens = [
                models.When(pk=pk, then=models.Value(new_key(), models.BigIntegerField()))
                for pk in batch
            ]
            model.objects.filter(pk__in=batch).update(
                read_key=models.Case(*whens, output_field=models.BigIntegerField())
            )


def _case(column: str, words: tuple[str, ...], *, to_code: bool) -> str:
    pairs = " ".join(
        f"WHEN '{word}' THEN {code}" if to_code else f"WHEN {code} THEN '{word}'"
        for code, word in enumerate(words)
    )
    return f"CASE {column} {pairs} END"


def copy_forward(apps, schema_editor):
    schema_editor.execute(
        f"INSERT INTO {NEW} (run_key, read_at, note_key, score, rank, tool, trust) "
        f"SELECT r.read_key, o.read_at, n.read_key, o.score, o.rank, "
        f"{_case('o.tool', TOOLS, to_code=True)}, {_case('o.trust', TRUSTS, to_code=True)} "
        f"FROM {OLD} o JOIN {NOTES} n ON n.id = o.note_id JOIN {RUNS} r ON r.id = o.run_id"
    )


def copy_back(apps, schema_editor):
    schema_editor.execute(
        f"INSERT INTO {OLD} (note_id, run_id, tool, rank, score, trust, read_at) "
        f"SELECT n.id, r.id, {_case('x.tool', TOOLS, to_code=False)}, x.rank, x.score, "
        f"{_case('x.trust', TRUSTS, to_code=False)}, x.read_at "
        f"FROM {NEW} x JOIN {NOTES} n ON n.read_key = x.note_key "
        f"JOIN {RUNS} r ON r.read_key = x.run_key ORDER BY x.read_at"
    )


def physical(apps, schema_editor):
    """What the ORM does not say: on PostgreSQL no primary key constraint and a BRIN index on
    read_at; on SQLite (where size matters less) the key stays and read_at gets a plain index."""
    if schema_editor.connection.vendor == "postgresql":
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(
                "SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'p'",
                [NEW],
            )
            for (name,) in cursor.fetchall():
                schema_editor.execute(f'ALTER TABLE {NEW} DROP CONSTRAINT "{name}"')
        schema_editor.execute(f"CREATE INDEX read_by_age ON {NEW} USING brin (read_at)")
    else:
        schema_editor.execute(f"CREATE INDEX read_by_age ON {NEW} (read_at)")


def physical_back(apps, schema_editor):
    schema_editor.execute("DROP INDEX IF EXISTS read_by_age")


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0021_reads"),
    ]

    operations = [
        # 1. The keys: added empty, filled, then required and unique.
        migrations.AddField(
            model_name="note",
            name="read_key",
            field=models.BigIntegerField(editable=False, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="read_key",
            field=models.BigIntegerField(editable=False, null=True),
        ),
        migrations.RunPython(fill_keys, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="note",
            name="read_key",
            field=models.BigIntegerField(
                default=memory_portal.memory.ids.new_read_key, editable=False, unique=True
            ),
        ),
        migrations.AlterField(
            model_name="run",
            name="read_key",
            field=models.BigIntegerField(
                default=memory_portal.memory.ids.new_read_key, editable=False, unique=True
            ),
        ),
        # 2. The old table set aside under another name (its reverse accessors freed).
        migrations.AlterField(
            model_name="noteread",
            name="note",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="memory.note",
            ),
        ),
        migrations.AlterField(
            model_name="noteread",
            name="run",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="memory.run",
            ),
        ),
        migrations.RenameModel("NoteRead", "NoteReadV1"),
        migrations.AlterModelTable("NoteReadV1", OLD),
        # 3. The new table, its records, the old table gone.
        migrations.CreateModel(
            name="NoteRead",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "run",
                        "read_at",
                        "note",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                (
                    "run",
                    models.ForeignKey(
                        db_column="run_key",
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="reads",
                        to="memory.run",
                        to_field="read_key",
                    ),
                ),
                ("read_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "note",
                    models.ForeignKey(
                        db_column="note_key",
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="reads",
                        to="memory.note",
                        to_field="read_key",
                    ),
                ),
                ("score", models.FloatField(blank=True, null=True)),
                ("rank", models.PositiveSmallIntegerField()),
                ("tool", memory_portal.memory.run_records.SmallCode(words=TOOLS)),
                ("trust", memory_portal.memory.run_records.SmallCode(words=TRUSTS)),
            ],
            options={
                "db_table": NEW,
                "indexes": [
                    models.Index(fields=["note", "read_at"], name="reads_of_note"),
                    models.Index(fields=["run"], name="reads_of_run"),
                ],
            },
        ),
        migrations.RunPython(copy_forward, copy_back),
        migrations.DeleteModel("NoteReadV1"),
        migrations.RunPython(physical, physical_back),
    ]
