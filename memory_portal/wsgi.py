"""WSGI entry point: `gunicorn memory_portal.wsgi`."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_portal.settings")

application = get_wsgi_application()

# Without collected static files every page would be a 500: refuse to start instead, saying so.
from memory_portal.checks import refuse_to_start_without_collected_static  # noqa: E402

refuse_to_start_without_collected_static()
