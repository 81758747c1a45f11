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

from memory_portal import health  # noqa: E402

# The checks /readyz makes: the database answers; every migration is applied.
wanted = ["database", "migrations"] if "--migrated" in sys.argv else ["database"]
deadline = time.monotonic() + float(os.environ.get("MEMORY_PORTAL_START_WAIT", "120"))
while True:
    try:
        for name in wanted:
            health.CHECKS[name]()
        break
    except Exception as exc:  # not up, or not migrated yet: said if it never comes
        waiting_for = f"{exc.__class__.__name__}: {exc}".strip()
    connection.close()
    if time.monotonic() > deadline:
        print(f"gave up waiting: {waiting_for}", file=sys.stderr)
        sys.exit(1)
    time.sleep(2)
