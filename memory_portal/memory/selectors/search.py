"""Search over what an actor may list: full text, and with meaning on, the hybrid ranking."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import connection, connections
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

from .. import fastsql
from ..actors import Actor
from ..embeddings import configured_name, embedding_settings
from ..lru import Kept, first_expiry
from ..models import Note, Project, Repository, Run
from ..recall.cache import fact_cache, vector_stored
from ..recall.hybrid import Facts, TextRow, hybrid_scores
from ..validation import reject_unstorable
from .projects import setting_now
from .visibility import AgentView, notes_for_actor, view_state


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
    hybrid score recall uses, best first. An agent's search is its ranking (`search_ids`)."""
    if actor.is_agent:
        ranked = search_ids(actor=actor, query=query, kind=kind, target=target, day=day, tag=tag)
        return _in_order(Note.objects.all(), ranked)
    reject_unstorable("query", query)
    qs = _filtered(notes_for_actor(actor=actor, project=project), kind, target, day, tag)
    return ranked_by_query(qs, query, project=project, actor=actor)


def _filtered(qs: QuerySet[Note], kind, target, day, tag) -> QuerySet[Note]:
    if kind:
        qs = qs.filter(kind=kind)
    if target:
        qs = qs.filter(target=target)
    if day:
        qs = qs.filter(day=day)
    if tag:
        qs = qs.tagged(tag)
    return qs


# An agent's ranking of a query, by everything it is a function of (lru.Kept): a repeated
# search reads only its page until something the agent sees changes. At most 1,024 rankings of
# up to SEARCH_RESULTS ids (whose strings the fact cache's rows mostly hold already).
kept_rankings: Kept[tuple, tuple[str, ...]] = Kept(1024)


def search_ids(
    *,
    actor: Actor,
    query: str,
    kind: str | None = None,
    target: str | None = None,
    day: date | None = None,
    tag: str | None = None,
) -> tuple[str, ...]:
    """The ids of the notes an agent's search finds, best first (`notes_search`), read
    through the visibility rule and kept under the agent's `view_state`, the filters and the
    query (`kept_rankings`) when nothing in the ranking can change without a new revision:
    by words alone always; by meaning when every candidate has its stored vector of the
    configured provider and the query was scored by it; and at most SEARCH_RESULTS ids (a
    search by words alone lists every match). The rows of a page are then read by id
    (`notes_in_order`): a search answers what the agent saw at its token check's revision, as
    its status does."""
    reject_unstorable("query", query)
    project = actor.run.project
    setting = setting_now(actor=actor, project=project)
    view = AgentView.of_run(actor.run, setting=setting)
    by_meaning = _by_meaning(query)
    key = (
        *view_state(view, setting, Note.objects.db),
        (kind, target, day, tag),
        query,
        configured_name() if by_meaning else None,
        _threshold() if by_meaning else None,
    )
    ranked = kept_rankings.get(key)
    if ranked is None:
        qs = _filtered(notes_for_actor(actor=actor), kind, target, day, tag)
        if by_meaning:
            ranking = _ranking(qs, query, project=project, actor=actor)
        else:
            found = list(_full_text(qs, query).values_list("id", "expires_at")[:SEARCH_SCAN])
            ranking = Ranking(tuple(i for i, _ in found), first_expiry(at for _, at in found), True)
        if ranking.stable and len(ranking.ids) <= SEARCH_RESULTS:  # words alone may match more
            kept_rankings.put(key, ranking.ids, ranking.until)
        ranked = ranking.ids
    return ranked


def ranked_by_query(
    qs: QuerySet[Note], query: str, *, project: Project | None, actor: Actor | None = None
) -> QuerySet[Note]:
    """The one ranker of a text query over notes: the agents' `memory_search`, v1's and the
    admin API's `q`, and the dashboard's search box. With meaning on (and no operator in the
    query), the notes the words match and those close in meaning, by the hybrid score recall
    uses; otherwise the words' full-text matches, best first."""
    if not _by_meaning(query):
        return _full_text(qs, query)
    ranked = _ranking(qs, query, project=project, actor=actor).ids
    return _in_order(qs, ranked)


def _by_meaning(query: str) -> bool:
    return embedding_settings()["enabled"] and not _uses_operators(query)


def _uses_operators(query: str) -> bool:
    """A quoted phrase, an excluded word (`-word`) or `OR`: the caller asked for exact text,
    which meaning cannot honour, so the search stays full text."""
    words = query.split()
    return '"' in query or "OR" in words or any(w.startswith("-") for w in words)


def _threshold() -> float:
    return settings.MEMORY_PORTAL.get("RECALL_THRESHOLD", 0.5)


def _in_order(qs: QuerySet[Note], ranked: tuple[str, ...]) -> QuerySet[Note]:
    """The notes of `qs` among `ranked`, in its order."""
    if not ranked:
        return qs.none()
    return qs.filter(pk__in=ranked).order_by(_place_in(list(ranked)).asc())


SEARCH_SCAN = 5_000  # the newest notes a search compares by meaning (a project holds 2,000)
SEARCH_RESULTS = 200  # a hybrid search ranks at most this many notes; a longer ranking is not kept


@dataclass(frozen=True)
class Ranking:
    ids: tuple[str, ...]  # best first
    until: datetime | None  # the first expiry among them: the ranking holds until then
    stable: bool  # nothing in it can change without a new revision (it may be kept)


def _ranking(qs: QuerySet[Note], query: str, *, project, actor: Actor | None) -> Ranking:
    """The full-text matches and the meaning matches of `qs`, ranked by the hybrid score
    (lexical and semantic, the recall scorer; notes without a stored vector by words alone),
    then newest first.

    Ids first, then the winners' rows: one query reads the candidates' ids (the newest
    SEARCH_SCAN, more than a project may store) with whether each matches the words; their
    rows — with the terms' scorer and the decoded vectors — come from the revision-keyed cache
    recall uses (recall/cache.py); and only the notes that win are read whole, by the page."""
    newest = qs.order_by("-created_at", "-id")
    found = list(
        newest.annotate(text_match=_text_match(query)).values_list(
            "id", "text_match", "expires_at"
        )[:SEARCH_SCAN]
    )
    if not found:
        return Ranking((), None, True)
    text_ids = {i for i, matched, _ in found if matched}
    rows = _candidates(newest, tuple(i for i, _, _ in found), project, actor)
    scored = hybrid_scores(query, rows, stored_only=True)
    threshold = _threshold()
    kept = [
        (score, row)
        for row, score in zip(rows, scored.scores, strict=True)
        if row.id in text_ids or score >= threshold
    ]
    kept.sort(key=lambda p: (-p[0], p[1].id not in text_ids, -p[1].created_at.timestamp()))
    ids = tuple(row.id for _, row in kept[:SEARCH_RESULTS])
    expiry = {i: at for i, _, at in found}
    provider = configured_name()
    stable = (
        scored.fallback is None
        and scored.provider is not None
        and len(rows) == len(found)
        and all(vector_stored(row, provider) for row in rows)
    )
    return Ranking(ids, first_expiry(expiry[i] for i in ids), stable)


# What an agent's answer never shows, and costs the most to read: the note's stored vector,
# and its origin run's task vector and description (the answer shows the run's status).
ANSWER_SKIPS = {Note: ("embedding",), Run: ("task_embedding", "task_description")}
_PAGE_TABLES = (
    fastsql.Joined(Note, "e", skip=ANSWER_SKIPS[Note]),
    fastsql.Joined(Run, "r", "r.id = e.origin_run_id", skip=ANSWER_SKIPS[Run]),
    fastsql.Joined(Repository, "g", "g.id = e.evidence_repository_id"),
)


def notes_in_order(ids: Sequence[str]) -> list[Note]:
    """The notes `ids` — a page of `search_ids`, read through the visibility rule — in that
    order, each with its origin run and evidence repository, as an agent's answer shows them
    (without `ANSWER_SKIPS`): one statement built once and prepared on the connection
    (fastsql), where the ORM's compile of the same read cost more than the rest of a repeated
    search. A note deleted since is left out."""
    if not ids:
        return []
    if connections[Note.objects.db].vendor == "postgresql":
        where, params = "e.id = ANY(%s)", [list(ids)]
    else:
        where, params = f"e.id IN ({', '.join(['%s'] * len(ids))})", list(ids)
    found = {}
    for note, run, repository in fastsql.select_joined_rows(_PAGE_TABLES, where, params):
        Note.origin_run.field.set_cached_value(note, run)
        Note.evidence_repository.field.set_cached_value(note, repository)
        found[note.pk] = note
    return [found[i] for i in ids if i in found]


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
