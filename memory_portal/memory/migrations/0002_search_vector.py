"""PostgreSQL full-text search: a generated tsvector over summary, content and tags, with a
project-scoped GIN index (btree_gin lets the project id sit in the same index). SQLite keeps
its plain fallback search, so this migration does nothing there."""

from django.db import migrations

FORWARD = [
    "CREATE EXTENSION IF NOT EXISTS btree_gin",
    """
    ALTER TABLE project_memory_entry ADD COLUMN search_vector tsvector
    GENERATED ALWAYS AS (
        setweight(to_tsvector('english', coalesce(summary, '')), 'A') ||
        setweight(to_tsvector('english', coalesce(content, '')), 'B') ||
        setweight(to_tsvector('simple', replace(coalesce(tags_text, ''), '|', ' ')), 'A')
    ) STORED
    """,
    "CREATE INDEX note_search_gin ON project_memory_entry USING gin (project_id, search_vector)",
]
BACKWARD = [
    "DROP INDEX IF EXISTS note_search_gin",
    "ALTER TABLE project_memory_entry DROP COLUMN IF EXISTS search_vector",
]


def forward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for statement in FORWARD:
        schema_editor.execute(statement)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for statement in BACKWARD:
        schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("memory", "0001_initial")]

    operations = [migrations.RunPython(forward, backward)]
