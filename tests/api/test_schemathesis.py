"""Property-based API testing: schemathesis generates requests from /api/openapi.json and
checks that nothing answers 5xx and every response matches the documented schema."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks as st_checks

from memory_portal.memory import services
from memory_portal.wsgi import application

schema = schemathesis.openapi.from_wsgi("/api/openapi.json", application)


@pytest.fixture
def keep_connection():
    """Django's test client stops the request signals from closing the test's connection;
    schemathesis calls the WSGI app directly, so do the same here."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def bearer(world, keep_connection):
    """A manager's user token and an agent run's token, both with write scope."""
    return {
        "person": services.token_create(actor=None, user=world.manager)[1],
        "agent": services.token_create(actor=None, run=world.run)[1],
    }


@schema.parametrize()
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
@pytest.mark.django_db
def test_api_conforms_to_its_schema(case, bearer):
    token = bearer["agent"] if case.path.startswith(("/api/tools", "/api/v1")) else bearer["person"]
    case.call_and_validate(
        headers={"Authorization": f"Bearer {token}"},
        checks=[
            st_checks.not_a_server_error,
            st_checks.status_code_conformance,
            st_checks.content_type_conformance,
            st_checks.response_schema_conformance,
        ],
    )
