"""Recall (docs/RECALL.md), along its seams:

- `text`: terms of a text (word lists, phrases, synonyms, the Porter stemmer);
- `lexical`: the IDF coverage scorer over the facts' terms;
- `hybrid`: the lexical and the semantic score combined (embeddings.py makes the vectors);
- `facts`: the agent's live facts as plain rows, through a cache keyed on the revision;
- `service`: `recall()` itself — scoring, picking within the caps, the day log, the block.

Its quality on the labelled sets is measured beside the product (`bench/recall_eval.py`).
The package imports none of them itself: `hybrid` sits below the selectors (memory_search ranks
with it) and `service` above them, so `recall()` is imported from `recall.service`.
"""
