"""The client's models cannot drift from the server: each is compared with the schema of the
same name in the OpenAPI document a live server serves (every property a field and back, a
field the client requires required by the server, the JSON types alike), and each route the
client calls exists with the method it uses."""

from __future__ import annotations

import dataclasses
import inspect
import re
import types
import typing
from datetime import date, datetime
from pathlib import Path

import httpx
import pytest
from memory_portal_client import client as client_module
from memory_portal_client import models

pytestmark = pytest.mark.django_db(transaction=True)

JSON_TYPES = {str: {"string"}, int: {"integer"}, float: {"number"}, bool: {"boolean"},
              datetime: {"string"}, date: {"string"}, dict: {"object"}, list: {"array"},
              typing.Any: None}  # fmt: skip


@pytest.fixture
def document(live_server):
    return httpx.get(f"{live_server.url}/api/openapi.json").json()


def _schema_types(schema: dict, components: dict) -> set[str] | None:
    """The JSON types a property schema admits (None: any)."""
    if "$ref" in schema:
        return {"object"}
    if "anyOf" in schema:
        kinds: set[str] = set()
        for option in schema["anyOf"]:
            found = _schema_types(option, components)
            if found is None:
                return None
            kinds |= found
        return kinds
    if "type" in schema:
        return {schema["type"]}
    if "const" in schema or "enum" in schema:
        return {"string"}
    return None


def _field_types(annotation) -> set[str] | None:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        kinds: set[str] = set()
        for option in typing.get_args(annotation):
            if option is type(None):
                kinds.add("null")
                continue
            found = _field_types(option)
            if found is None:
                return None
            kinds |= found
        return kinds
    if origin is not None:
        return JSON_TYPES[origin]
    if dataclasses.is_dataclass(annotation):
        return {"object"}
    return JSON_TYPES[annotation]


@pytest.mark.parametrize("model", models.MODELS, ids=lambda m: m.__name__)
def test_model_matches_the_servers_schema(document, model):
    components = document["components"]["schemas"]
    schema = components[model.__schema__]
    properties = schema["properties"]
    required = set(schema.get("required", []))
    hints = typing.get_type_hints(model)
    fields = {models.wire_name(f.name): f for f in dataclasses.fields(model) if f.name != "raw"}
    extras = models.OPTIONAL_EXTRAS.get(model.__schema__, set())
    assert set(fields) - extras == set(properties), "fields and properties differ"
    for name, f in fields.items():
        if models._required(f):
            assert name in required, f"{name}: the client requires what the server may omit"
        if name in extras:
            continue
        server = _schema_types(properties[name], components)
        client = _field_types(hints[f.name])
        if server is not None and client is not None:
            assert server - {"null"} <= client - {"null"} or server <= client, (name, server)
            if "null" in server:
                assert "null" in client, f"{name}: the server may send null"


def _placeholder(name: str, parameter: inspect.Parameter):
    annotation = str(parameter.annotation)
    if name == "data":
        return b"{}"
    if name in {"enabled"}:
        return True
    if name in {"arguments"}:
        return {}
    if "Literal" in annotation:
        return re.search(r"Literal\['([^']+)'", annotation).group(1)
    return f"{name}-1"


def test_every_method_calls_a_route_of_the_document(document):
    """Each public method, called with placeholders through a transport that records the
    request, sends one request whose verb and path are an operation of the document."""
    operations = [
        (method.upper(), re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(path)) + "$"))
        for path, item in document["paths"].items()
        for method in item
    ]
    sent: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(418, json={"error": {"code": "x", "message": "x", "hint": "x"}})

    portal = client_module.Client("http://portal.test", "t", transport=httpx.MockTransport(record))
    methods = [
        (name, function)
        for name, function in inspect.getmembers(client_module._Routes, inspect.isfunction)
        if not name.startswith("_")
    ]
    assert len(methods) >= 40
    for name, function in methods:
        parameters = list(inspect.signature(function).parameters.items())[1:]
        args = [
            _placeholder(n, p)
            for n, p in parameters
            if p.default is inspect.Parameter.empty and p.kind is p.POSITIONAL_OR_KEYWORD
        ]
        kwargs = {
            n: _placeholder(n, p)
            for n, p in parameters
            if p.default is inspect.Parameter.empty and p.kind is p.KEYWORD_ONLY
        }
        if name == "start_run":
            kwargs = {"project": "p", "agent_id": "agt_1"}
        if name == "call_tool":
            args = ["memory_status", {}]
        before = len(sent)
        try:
            getattr(portal, name)(*args, **kwargs)
        except Exception as exc:  # the recorded answer is a refusal
            assert getattr(exc, "code", None) == "x", (name, exc)
        assert len(sent) == before + 1, name
        request = sent[-1]
        assert any(
            verb == request.method and pattern.match(request.url.path)
            for verb, pattern in operations
        ), (name, request.method, request.url.path)


def test_the_readme_names_every_method():
    readme = (Path(__file__).resolve().parents[2] / "clients/python/README.md").read_text()
    methods = [
        name
        for name, _ in inspect.getmembers(client_module._Routes, inspect.isfunction)
        if not name.startswith("_")
    ]
    assert [m for m in methods if f"`{m}`" not in readme] == []
