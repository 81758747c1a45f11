"""`python -m memory_portal.memory.management.benchworker COUNTS.json db_worker ARGS…`: what
`manage.py db_worker ARGS…` runs (Django's `execute_from_command_line`, the same settings), with
every statement the worker sends counted by a connection execute_wrapper on each connection it
opens — not DEBUG — and written to COUNTS.json as it exits: `all` of them (its start, the queue's
polls and claims, the tasks), those sent `in_tasks` (from task_started to task_finished: the
review and its result's row) and the number of `tasks`. For memory_bench_reviews' fan-out."""

from __future__ import annotations

import atexit
import json
import os
import sys
from pathlib import Path


def main() -> None:
    counts_path = Path(sys.argv[1])
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_portal.settings")
    import django

    django.setup()
    from django.core.management import execute_from_command_line
    from django.db.backends.signals import connection_created
    from django.tasks.signals import task_finished, task_started

    counts = {"all": 0, "in_tasks": 0, "tasks": 0}
    in_task = [False]

    def counter(execute, sql, params, many, context):
        counts["all"] += 1
        counts["in_tasks"] += in_task[0]
        return execute(sql, params, many, context)

    def created(sender, connection, **kwargs) -> None:
        if counter not in connection.execute_wrappers:
            connection.execute_wrappers.append(counter)

    def started(sender, **kwargs) -> None:
        in_task[0] = True

    def finished(sender, **kwargs) -> None:
        in_task[0] = False
        counts["tasks"] += 1

    connection_created.connect(created, weak=False)
    task_started.connect(started, weak=False)
    task_finished.connect(finished, weak=False)
    atexit.register(lambda: counts_path.write_text(json.dumps(counts)))
    execute_from_command_line(["manage.py", *sys.argv[2:]])


if __name__ == "__main__":
    main()
