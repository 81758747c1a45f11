"""WSGI entry point: `gunicorn memory_portal.wsgi`."""

import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_portal.settings")

application = get_wsgi_application()

# Without collected static files every page would be a 500: refuse to start instead, saying so.
from memory_portal.checks import refuse_to_start_without_collected_static  # noqa: E402

refuse_to_start_without_collected_static()

# The URLconf, and the API and MCP server it imports, loaded as the process starts rather than
# inside the first request it serves: seconds of imports that the first callers of every new
# worker (a deploy, a recycled or a replaced one) would otherwise wait for, other projects'
# writes among them.
get_resolver().reverse_dict  # noqa: B018 - read for its side effect: the URLconf imported
