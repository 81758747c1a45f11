#!/bin/sh
# The web container: once the database answers, the schema brought up to this release (once,
# at start), then gunicorn with the repository's gunicorn.conf.py.
set -eu
python container/wait_for_db.py
python manage.py migrate --noinput
exec gunicorn memory_portal.wsgi -c gunicorn.conf.py
