"""Search over what an actor may list: full text, and with meaning on, the hybrid ranking."""

from __future__ import annotations

from datetime import date

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import connection
from django.db.models import (
    BooleanField,
    ExpressionWrapper,
    F,
    Func,
    IntegerField,
    Q,
    QuerySet,
    TextField,
    Value,
)
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast, Concat

from ..actors import Actor
from ..embeddings import embedding_settings
from ..models import Note, Project
from ..recall.cache import fact_cache
from ..recall.hybrid import Facts, TextRow, hybrid_scores
from ..validation import reject_unstorable
from .projects import setting_now
from .visibility import notes_for_actor


def notes_search(
    *,
    actor: Actor,
    project: Project | None = None,
    query: str,
    kind: str | None = None,
    target: str | None = None,
    day: date | None = None,
    tag: str | None = None,
) -> QuerySet[Note]:
    """Search over what the actor may list: full text, and, when embeddings are on, meaning
    (docs/RECALL.md, "Search and near-duplicates"). Full text: PostgreSQL websearch_to_tsquery over
    the generated `search_vector` column (GIN index), best rank first; SQLite: every word must occur
    in content or summary, newest first. With meaning, the full-text matches and the notes whose
    stored vector is close to the query (hybrid score ≥ the recall threshold) are ranked by the
    hybrid score recall uses, best first."""
    reject_unstorable("query", query)
    qs = notes_for_actor(actor=actor, project=project)
    if kind:
        qs = qs.filter(kind=kind)
    if target:
        qs = qs.filter(target=target)
    if day:
        qs = qs.filter(day=day)
    if tag:
        qs = qs.tagged(tag)
    project = project or (actor.run.project if actor.is_agent else None)
    return ranked_by_query(qs, query, project=project, actor=actor)


def ranked_by_query(
    qs: QuerySet[Note], query: str, *, project: Project | None, actor: Actor | None = None
) -> QuerySet[Note]:
    """The one ranker of a text query over notes: the agents' `memory_search`, v1's and the
    admin API's `q`, and the dashboard's search box. With meaning on (and no operator in the
    query), the notes the words match and those close in meaning, by the hybrid score recall
    uses; otherwise the words' full-text matches, best first."""
    text_qs = _full_text(qs, query)
    if not embedding_settings()["enabled"] or _uses_operators(query):
        return text_qs
    return _hybrid_ranked(qs, text_qs, query, project=project, actor=actor)


def _uses_operators(query: str) -> bool:
    """A quoted phrase, an excluded word (`-word`) or `OR`: the caller asked for exact text,
    which meaning cannot honour, so the search stays full text."""
    words = query.split()
    return '"' in query or "OR" in words or any(w.startswith("-") for w in words)


SEARCH_SCAN = 5_000  # the newest notes a search compares by meaning (a project holds 2,000)
SEARCH_RESULTS = 200  # a hybrid search ranks at most this many notes


def _hybrid_ranked(
    qs: QuerySet[Note], text_qs: QuerySet[Note], query: str, *, project, actor: Actor | None
) -> QuerySet[Note]:
    """The full-text matches and the meaning matches of `qs`, ranked by the hybrid score
    (lexical and semantic, the recall scorer; notes without a stored vector by words alone),
    then newest first. One query embedding (cached), one matrix product over stored vectors.

    Ids first, then the winners' rows: one query reads the candidates' ids (the newest
    SEARCH_SCAN, more than a project may store) with whether each matches the words; their
    rows — with the terms' scorer and the decoded vectors — come from the revision-keyed cache
    recall uses (recall/cache.py); and only the notes that win are read whole, as the page's
    query."""
    newest = qs.order_by("-created_at", "-id")
    pairs = list(
        newest.annotate(text_match=_text_match(query)).values_list("id", "text_match")[:SEARCH_SCAN]
    )
    if not pairs:
        return text_qs
    text_ids = {i for i, matched in pairs if matched}
    rows = _candidates(newest, tuple(i for i, _ in pairs), project, actor)
    scores = hybrid_scores(query, rows, stored_only=True).scores
    threshold = settings.MEMORY_PORTAL.get("RECALL_THRESHOLD", 0.5)
    kept = [
        (score, row)
        for row, score in zip(rows, scores, strict=True)
        if row.id in text_ids or score >= threshold
    ]
    kept.sort(key=lambda p: (-p[0], p[1].id not in text_ids, -p[1].created_at.timestamp()))
    ranked = [row.id for _, row in kept[:SEARCH_RESULTS]]
    if not ranked:
        return qs.none()
    return qs.filter(pk__in=ranked).order_by(_place_in(ranked).asc())


def _candidates(
    newest: QuerySet[Note], ids: tuple, project: Project | None, actor: Actor | None
) -> Facts:
    """The rows of the notes `ids` (read by `newest`), through the cache at the project's
    current revision (as the token check read it, or read now)."""
    if project is None:
        return Facts(TextRow.of(newest.filter(pk__in=ids)))
    setting = setting_now(actor=actor, project=project)
    return fact_cache.facts(project, setting.revision, newest, ids=ids)


def _place_in(ids: list[str]) -> Func:
    """A note's place in `ids`, as one parameter: a CASE with a WHEN for each of up to
    SEARCH_RESULTS ids cost more to build and compile than the rest of the search. The note's
    id is `F("id")`, so Django names its column wherever the query ends up (a subquery too)."""
    if connection.vendor == "postgresql":
        return Func(
            Value(ids, output_field=ArrayField(TextField())),
            Cast("id", TextField()),
            function="array_position",
            output_field=IntegerField(),
        )
    # SQLite: where ",id," starts in ",id1,id2,…," (ids hold no comma).
    return Func(
        Value("," + ",".join(ids) + ","),
        Concat(Value(","), F("id"), Value(","), output_field=TextField()),
        function="instr",
        output_field=IntegerField(),
    )


_TSQUERY = "websearch_to_tsquery('english', %s)"


def _text_match(query: str):
    """Whether a note matches the query's words, as an expression: PostgreSQL's full-text
    match on the generated `search_vector`; SQLite: every word in content or summary."""
    if connection.vendor == "postgresql":
        return RawSQL(
            f"coalesce(project_memory_entry.search_vector, ''::tsvector) @@ {_TSQUERY}",
            (query,),
            BooleanField(),
        )
    words = Q()
    for word in query.split():
        word = word.strip("\"'")
        if word and word.lower() not in {"or", "and"} and not word.startswith("-"):
            words &= Q(content__icontains=word) | Q(summary__icontains=word)
    return ExpressionWrapper(words, BooleanField()) if words else Value(True)


def _full_text(qs: QuerySet[Note], query: str) -> QuerySet[Note]:
    # On PostgreSQL the project first, then the words: the match is on an expression the GIN
    # index does not cover, so PostgreSQL reads the project's rows (at most the cap) by its
    # btree index and tests each stored vector, instead of collecting the word's rows across
    # every project from the GIN index and discarding all but this project's.
    qs = qs.filter(_text_match(query))
    if connection.vendor == "postgresql":
        rank = RawSQL(f"ts_rank(project_memory_entry.search_vector, {_TSQUERY})", (query,))
        return qs.annotate(rank=rank).order_by("-rank", "-created_at", "-id")
    return qs.order_by("-created_at", "-id")
