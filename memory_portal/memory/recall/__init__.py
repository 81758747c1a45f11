"""Recall (SPEC §3.2; docs/RECALL.md), along its seams:

- `text`: terms of a text (word lists, phrases, synonyms, the Porter stemmer);
- `lexical`: the IDF coverage scorer over the facts' terms;
- `hybrid`: the lexical and the semantic score combined (embeddings.py makes the vectors);
- `facts`: the agent's live facts as plain rows, through a cache keyed on the revision;
- `service`: `recall()` itself — scoring, picking within the caps, the day log, the block;
- `evaluation`: quality on the labelled sets (`memory_recall_eval`).
"""

from .service import Picked, RecallResult, recall

__all__ = ["Picked", "RecallResult", "recall"]
