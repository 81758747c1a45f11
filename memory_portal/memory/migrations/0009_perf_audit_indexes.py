"""The audit log at millions of events: keyset pages on (created_at, id) and exact actor
filters, each an index scan (dashboard/filters.py AuditFilter, dashboard/tables.py
keyset_page)."""

from django.db import migrations, models

INDEXES = [
    (["-created_at", "-id"], "audit_created"),
    (["actor_label", "-created_at"], "audit_actor_label"),
    (["actor_agent_id", "-created_at"], "audit_actor_agent"),
    (["actor_run_id", "-created_at"], "audit_actor_run"),
]


class Migration(migrations.Migration):
    dependencies = [("memory", "0008_recall_note_embedding")]

    operations = [
        migrations.AddIndex(model_name="auditevent", index=models.Index(fields=f, name=n))
        for f, n in INDEXES
    ]
