"""Wait for the database to answer (and, with --migrated, for every migration to be applied),
up to MEMORY_PORTAL_START_WAIT seconds (120); then exit 0, or 1 saying what it waited for.
The web container runs it before its migrations, the worker before its first task."""

import os
import sys
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_portal.settings")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.db.migrations.executor import MigrationExecutor  # noqa: E402

deadline = time.monotonic() + float(os.environ.get("MEMORY_PORTAL_START_WAIT", "120"))
while True:
    try:
        connection.ensure_connection()
        if "--migrated" not in sys.argv:
            break
        executor = MigrationExecutor(connection)
        if not executor.migration_plan(executor.loader.graph.leaf_nodes()):
            break
        waiting_for = "the migrations (the web container applies them)"
    except Exception as exc:  # the database not up yet: said if it never comes
        waiting_for = f"the database ({exc.__class__.__name__}: {exc})".strip()
    connection.close()
    if time.monotonic() > deadline:
        print(f"gave up waiting for {waiting_for}", file=sys.stderr)
        sys.exit(1)
    time.sleep(2)
