"""The WSGI entry point starts a process ready to serve: the URLconf (with the API and the MCP
server) is imported before the first request, not inside it."""

from __future__ import annotations

import os
import subprocess
import sys

from django.conf import settings


def test_the_urlconf_is_imported_before_the_first_request():
    probe = (
        "import sys, time\n"
        "import memory_portal.wsgi\n"
        "print(all(m in sys.modules for m in "
        "('memory_portal.urls', 'memory_portal.api.mcp_server', 'memory_portal.api.v1')))\n"
        "from django.urls import reverse\n"
        "started = time.perf_counter(); reverse('dashboard:projects')\n"
        "print(time.perf_counter() - started < 0.05)\n"
    )
    env = {
        **os.environ,
        "MEMORY_PORTAL_PLAIN_STATIC": "true",
        "DJANGO_SETTINGS_MODULE": "memory_portal.settings",
    }
    answer = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=settings.BASE_DIR,
        env=env,
        timeout=120,
        check=True,
    )
    assert answer.stdout.split() == ["True", "True"], answer.stderr[-2000:]
