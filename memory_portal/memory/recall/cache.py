"""The process cache of note rows for scoring (docs/RECALL.md, "Speed"), keyed on the project's
memory revision: recall's facts (recall/facts.py) and `memory_search`'s candidates
(selectors/search.py) read the ids of what they score, and take the rows — with their terms'
scorer and their decoded vector matrix (hybrid.Facts) — from here.

Every service that changes a note bumps the project's revision (`MemorySetting.revision`) in
the same transaction, so what was read at one revision stays exact until the next. When the
ids, in that order, are a set the cache holds, the set is scored as it is; otherwise the rows
are taken from the cache and the ones it lacks read by id. The first read after a change of
revision reads the rows whole, as without the cache. A row without a stored vector of the
configured provider is never kept: the background thread and `memory_embed` store vectors
without bumping the revision.

Bounded: the rows of the newest revision of the last `CACHED_PROJECTS` projects read, and
sets holding at most `CACHED_FACTS` rows in all, least recently used out first. Shared by the
threads of a process behind one lock. `fact_cache.clear()` empties it (a test that changes
rows behind the services' back).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from ..embeddings import configured_name
from ..models import Note, Project
from .hybrid import Facts, TextRow

CACHED_PROJECTS = 8  # projects whose rows are kept
CACHED_FACTS = 16_000  # rows in the sets kept (each with its float32 vector: 1.5 KB)
_FETCH_CHUNK = 1_000  # ids per `pk__in` query (SQLite's bound on parameters)


def vector_stored(row: TextRow, provider: str | None) -> bool:
    """Whether nothing can change `row`'s vector without a new revision: it has its stored
    vector of the configured provider (or none is configured)."""
    return provider is None or (row.embedding is not None and row.embedding_model == provider)


class FactCache:
    """Fact rows per project, for the newest revision seen of each, and the fact sets last
    scored. A project is known by its id and creation time: a project deleted and another
    created with the same id (SQLite reuses the ids of a transaction rolled back) share
    nothing."""

    def __init__(self, projects: int = CACHED_PROJECTS, facts: int = CACHED_FACTS) -> None:
        self.projects = projects
        self.facts_held = facts
        self._lock = threading.Lock()
        # project -> (revision, rows by id)
        self._tables: OrderedDict[tuple, tuple[int, dict[str, TextRow]]] = OrderedDict()
        # (project, revision, ids in order) -> the set, with what scoring derived from it
        self._sets: OrderedDict[tuple, Facts] = OrderedDict()
        self._held = 0  # facts in the sets

    def clear(self) -> None:
        with self._lock:
            self._tables.clear()
            self._sets.clear()
            self._held = 0

    def _drop_sets(self, keep) -> None:
        """Drop the sets `keep` refuses, then the least recently used over the bound."""
        for key in [k for k in self._sets if not keep(k)]:
            self._held -= len(self._sets.pop(key))
        while self._held > self.facts_held:
            self._held -= len(self._sets.popitem(last=False)[1])

    def _rows(self, project: tuple, revision: int) -> dict[str, TextRow]:
        with self._lock:
            held = self._tables.get(project)
            if held is not None and held[0] == revision:
                self._tables.move_to_end(project)
                return held[1]
            rows: dict[str, TextRow] = {}
            if held is None or held[0] < revision:
                self._tables[project] = (revision, rows)
                self._tables.move_to_end(project)
                while len(self._tables) > self.projects:
                    self._tables.popitem(last=False)
                tables = self._tables
                self._drop_sets(lambda k: k[0] in tables and tables[k[0]][0] == k[1])
            # A recall that read an older revision than the one held (a change committed
            # meanwhile) gets rows of its own, not kept.
            return rows

    def _keep(self, rows: dict[str, TextRow], fresh: list[TextRow]) -> bool:
        """Keep the rows `memory_embed` cannot rewrite; False when some could not be kept."""
        provider = configured_name()
        stable = [r for r in fresh if vector_stored(r, provider)]
        with self._lock:
            rows.update((r.id, r) for r in stable)
        return len(stable) == len(fresh)

    def _keep_set(self, key: tuple, facts: Facts) -> None:
        with self._lock:
            if self._tables.get(key[0], (None,))[0] != key[1] or key in self._sets:
                return  # not the project's current revision, or kept meanwhile
            self._sets[key] = facts
            self._held += len(facts)
            self._drop_sets(lambda k: True)

    def facts(self, project: Project, revision: int, live, ids: tuple | None = None) -> Facts:
        """The rows of the `live` queryset (the project's notes, ordered), from the cache when
        it holds them at this revision; `ids`: live's ids, in order, when the caller read them
        already (they are not read again)."""
        at = (project.pk, project.created_at)
        rows = self._rows(at, revision)
        if not rows and ids is None:
            facts = Facts(TextRow.of(live))
            if self._keep(rows, list(facts)):
                self._keep_set((at, revision, tuple(f.id for f in facts)), facts)
            return facts
        if ids is None:
            ids = tuple(live.values_list("id", flat=True))
        key = (at, revision, ids)
        with self._lock:
            facts = self._sets.get(key)
            if facts is not None:
                self._sets.move_to_end(key)
                return facts
            found = {i: rows[i] for i in ids if i in rows}
        missing = [i for i in ids if i not in found]
        stable = True
        for start in range(0, len(missing), _FETCH_CHUNK):
            fresh = TextRow.of(Note.objects.filter(pk__in=missing[start : start + _FETCH_CHUNK]))
            stable = self._keep(rows, fresh) and stable
            found.update((r.id, r) for r in fresh)
        facts = Facts(found[i] for i in ids if i in found)  # a fact deleted meanwhile is left out
        if stable and len(facts) == len(ids):
            self._keep_set(key, facts)
        return facts


fact_cache = FactCache()
