"""API personas: a bearer token for every actor of the `world` fixture."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from memory_portal.api import after_answer
from memory_portal.memory import services


class Api:
    def __init__(self, client: Client):
        self.client = client

    def call(self, method: str, path: str, token: str | None = None, body=None, **extra):
        headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
        headers.update(extra)
        kwargs = {}
        if body is not None:
            kwargs = {"data": json.dumps(body), "content_type": "application/json"}
        response = getattr(self.client, method.lower())(path, **kwargs, **headers)
        return response

    def get(self, path, token=None, **kw):
        return self.call("GET", path, token, **kw)

    def post(self, path, token=None, body=None, **kw):
        return self.call("POST", path, token, body if body is not None else {}, **kw)

    def tool(self, name, token, body=None):
        return self.post(f"/api/tools/{name}", token, body or {})


def error_code(response) -> str:
    body = response.json()
    assert set(body) == {"error"}, body
    assert body["error"]["message"] and body["error"]["hint"], body
    return body["error"]["code"]


@pytest.fixture
def api(client):
    return Api(client)


@pytest.fixture
def tokens(world):
    t = type("Tokens", (), {})()
    t.agent = services.token_create(actor=None, run=world.run)[1]
    t.agent2 = services.token_create(actor=None, run=world.run2)[1]
    t.reviewer = services.token_create(actor=None, run=world.reviewer_run)[1]
    t.implementer = services.token_create(actor=None, run=world.implementer_run)[1]
    t.agent_readonly = services.token_create(actor=None, run=world.run, can_write=False)[1]
    t.manager = services.token_create(actor=None, user=world.manager)[1]
    t.member = services.token_create(actor=None, user=world.member)[1]
    t.outsider = services.token_create(actor=None, user=world.outsider)[1]
    t.manager_readonly = services.token_create(actor=None, user=world.manager, can_write=False)[1]
    return t


class RoundTrips:
    """The statements a block sends and the round trips they take: a statement is one, and
    statements sent together in a pipeline (psycopg's pipeline mode, answered at one sync) are
    one between them. `statements`: each statement's SQL; `trips`: the SQL of each round trip's
    statements, joined by "; "; `answered`: how many trips had been sent when the answer was
    complete (the rest ran after it, api/after_answer.py; None: nothing was left)."""

    def __init__(self, connection):
        self.connection = connection
        self.statements: list[str] = []
        self.trips: list[str] = []
        self.answered: int | None = None
        self._piped = False

    def __call__(self, execute, sql, params, many, context):
        raw = self.connection.connection
        pgconn = getattr(raw, "pgconn", None)  # PostgreSQL's; SQLite sends one at a time
        piped = pgconn is not None and pgconn.pipeline_status != 0
        if piped and self._piped:
            self.trips[-1] += f"; {sql}"
        else:
            self.trips.append(sql)
        self._piped = piped
        self.statements.append(sql)
        return execute(sql, params, many, context)

    def __enter__(self):
        self._wrapper = self.connection.execute_wrapper(self)
        self._wrapper.__enter__()
        self._run = after_answer.run

        def run(pending):
            if self.answered is None:
                self.answered = len(self.trips)
            return self._run(pending)

        after_answer.run = run
        return self

    def __exit__(self, *exc):
        after_answer.run = self._run
        return self._wrapper.__exit__(*exc)

    @property
    def before_answer(self) -> list[str]:
        return self.trips if self.answered is None else self.trips[: self.answered]

    @property
    def after_answer(self) -> list[str]:
        return [] if self.answered is None else self.trips[self.answered :]
