"""The Python client (clients/python) against a live server: pytest-django's live_server, a
real HTTP server in a thread, with the `world` fixture's project."""

from __future__ import annotations

import pytest

from memory_portal.memory import services


@pytest.fixture
def portal_tokens(world):
    t = type("PortalTokens", (), {})()
    t.run = services.token_create(actor=None, run=world.run)[1]
    t.manager = services.token_create(actor=None, user=world.manager)[1]
    t.key = services.key_create(actor=world.as_manager, agent=world.agent, label="Client")[1]
    return t
