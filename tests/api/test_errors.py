"""Authentication and the one error envelope: missing / bad tokens, unknown routes and
methods, the session cookie, deleted runs and unexpected failures."""

from __future__ import annotations

import pytest

from memory_portal.memory import services
from memory_portal.memory.errors import CODES

from .conftest import error_code


def test_missing_token(api):
    response = api.get("/api/tools")
    assert response.status_code == 401 and error_code(response) == "auth_required"
    assert api.post("/api/v1/memories", None, {"text": "x"}).status_code == 401


@pytest.mark.parametrize(
    "header",
    ["Bearer", "Bearer nonsense", "Basic dXNlcjpwYXNz", "Bearer mp_000000000000_nope", "Token x"],
)
def test_invalid_token(api, db, header):
    response = api.client.get("/api/tools", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401 and error_code(response) == "auth_invalid"


def test_revoked_and_deleted_run_tokens(api, world):
    token, plaintext = services.token_create(actor=None, run=world.run)
    services.token_revoke(actor=None, token=token)
    assert error_code(api.get("/api/tools", plaintext)) == "auth_invalid"
    _, live = services.token_create(actor=None, run=world.run2)
    services.run_delete(actor=None, run=world.run2)
    assert error_code(api.get("/api/tools", live)) == "auth_invalid"


def test_session_cookie_is_never_accepted(api, world):
    api.client.force_login(world.manager)
    response = api.get("/api/admin/projects/acme-web/memory")
    assert response.status_code == 401 and error_code(response) == "auth_required"


def test_unknown_route_and_method(api, tokens):
    response = api.get("/api/nothing/here", tokens.agent)
    assert response.status_code == 404 and error_code(response) == "not_found"
    response = api.call("DELETE", "/api/tools/memory_write", tokens.agent)
    assert response.status_code == 405 and error_code(response) == "method_not_allowed"


def test_malformed_json(api, tokens):
    response = api.client.post(
        "/api/tools/memory_write",
        data="{not json",
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {tokens.agent}",
    )
    assert response.status_code == 400 and error_code(response) == "memory_invalid"


def test_unexpected_failure_is_a_500_envelope_without_details(api, tokens, monkeypatch):
    from memory_portal.memory import services as services_module

    def explode(**kwargs):
        raise RuntimeError("boom: secret note body")

    monkeypatch.setattr(services_module, "note_write", explode)
    response = api.tool("memory_write", tokens.agent, {"kind": "fact", "content": "x"})
    assert response.status_code == 500 and error_code(response) == "internal_error"
    assert "boom" not in response.content.decode()


def test_every_error_code_has_status_and_hint():
    for code, spec in CODES.items():
        assert 400 <= spec.status < 600 and spec.hint, code


def test_openapi_and_docs_are_served(client):
    schema = client.get("/api/openapi.json").json()
    assert schema["info"]["title"] == "Memory Portal API"
    assert "/api/tools/memory_write" in schema["paths"]
    assert "/api/v1/memories/recall" in schema["paths"]
    assert client.get("/api/docs").status_code == 200


def test_nul_characters_are_a_clear_400_everywhere(api, tokens, world):
    body = api.post("/api/v1/memories", tokens.agent, {"text": "nul \u0000 here"})
    assert body.status_code == 400 and error_code(body) == "memory_invalid"
    tool = api.tool("memory_search", tokens.agent, {"query": "a\u0000b"})
    assert tool.status_code == 400 and error_code(tool) == "memory_invalid"
    path = api.post("/api/v1/memories/mem_%00/unarchive", tokens.agent)
    assert path.status_code == 400 and error_code(path) == "memory_invalid"
    query = api.get("/api/v1/memories?agentId=%00", tokens.member)
    assert query.status_code == 400 and error_code(query) == "memory_invalid"
    api.client.force_login(world.member)
    page = api.client.get("/p/acme-web/notes/mem_%00/")
    assert page.status_code == 400


def test_every_json_error_is_built_by_one_function():
    """`failures.json_error` builds every JSON error envelope: no other module writes
    `{"error": …}` into a response of its own."""
    import ast
    from pathlib import Path

    product = Path(__file__).resolve().parents[2] / "memory_portal"
    offenders = []
    for path in sorted(product.rglob("*.py")):
        if path.name == "failures.py" and path.parent == product:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "JsonResponse"):
                continue
            body = node.args[0] if node.args else None
            if isinstance(body, ast.Dict) and any(
                isinstance(key, ast.Constant) and key.value == "error" for key in body.keys
            ):
                offenders.append(f"{path.relative_to(product)}:{node.lineno}")
    assert not offenders


def test_the_openapi_document_is_built_once_per_process(client):
    """Built on the first request, then served as built (it depends on the code alone)."""
    from memory_portal.api.api import api

    first = client.get("/api/openapi.json")
    assert first.status_code == 200 and first.json()["info"]["title"] == "Memory Portal API"
    assert api.get_openapi_schema(path_prefix="/api/") is api.get_openapi_schema(
        path_prefix="/api/"
    )
    assert client.get("/api/openapi.json").content == first.content
