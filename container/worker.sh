#!/bin/sh
# The worker container: the task queue's worker (db_worker: daily reviews, notes' vectors) and
# the routine runner (memory_run_due_routines every five minutes, cron's job elsewhere). If
# either stops, the container stops, and its restart policy brings both back.
set -eu
python container/wait_for_db.py --migrated  # the web container migrates
python manage.py db_worker --no-reload --worker-id "${HOSTNAME:-worker}" &
worker=$!
(
  while :; do
    python manage.py memory_run_due_routines || echo "memory_run_due_routines failed" >&2
    sleep "${MEMORY_PORTAL_ROUTINES_EVERY:-300}"
  done
) &
routines=$!
trap 'kill "$worker" "$routines" 2>/dev/null; wait; exit 0' TERM INT
# Whichever ends first ends the container.
while kill -0 "$worker" 2>/dev/null && kill -0 "$routines" 2>/dev/null; do sleep 5; done
kill "$worker" "$routines" 2>/dev/null || true
wait || true
exit 1
