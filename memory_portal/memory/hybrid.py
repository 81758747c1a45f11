"""The hybrid score's old import path, kept for `selectors.notes_search`; the code is in
recall/hybrid.py."""

from .recall.hybrid import TextRow, hybrid_scores

__all__ = ["TextRow", "hybrid_scores"]
