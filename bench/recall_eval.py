"""Measure recall quality on a labelled set (docs/RECALL.md, "Quality").

The set is plain data (`FACTS`, `QUERIES`, `UNRELATED`, `HELD_OUT`; see
tests/memory/recall_set.py). Each query is scored against its agent's facts only, exactly as
`recall()` does it: `score_facts()` over the agent's facts (so the IDF is that agent's), then
`pick()` with the threshold, best first. No database is involved: the facts are lightweight
objects carrying what scoring and picking read (`content`, `summary`, `id`, `created_at`).

Figures are micro-averaged: precision = right picks / all picks, recall = right picks / all
expected facts, over every query of the set. Unrelated queries are scored against every agent's
facts and count their picks as false positives, reported apart.

Three scorers can be measured: `lexical` (words only), `semantic` (the calibrated embedding score
alone) and `hybrid` (what recall uses). The paraphrase set (tests/memory/recall_paraphrase_set.py:
`PARAPHRASES`, `PARAPHRASE_UNRELATED`, over the same facts) is loaded beside the main set, and
so is the development set (tests/memory/recall_dev_set.py: `DEV_PARAPHRASES`, `DEV_UNRELATED`),
written later to tune the semantic calibration on while the paraphrase set stays the blind
test (docs/RECALL.md, "Why these constants").
"""

from __future__ import annotations

import runpy
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

from django.conf import settings

from memory_portal.memory.recall.hybrid import hybrid_scores
from memory_portal.memory.recall.lexical import lexical_scores
from memory_portal.memory.recall.service import pick, pick_related, recall_settings
from memory_portal.memory.validation import task_text

SCORERS = ("lexical", "semantic", "hybrid", "cosine")
RANKS = (1, 5)  # R@k: an expected fact among the first k of the agent's facts, ranked


def _scorer(name: str, shared: dict | None = None):
    """The scorer called `name`: (query, facts) -> (scores, order), `order` being what its
    picks are ranked by (None: the scores). `cosine` is the bare model, a peer for ranking: the
    facts by their cosine to the query, scores being the cosines. `shared` lets the runs of one
    comparison compute each (query, agent) once."""
    shared = {} if shared is None else shared

    def scored(query, facts):
        key = (query, tuple(f.id for f in facts))
        if key not in shared:
            shared[key] = hybrid_scores(query, facts)
        return shared[key]

    def cosines(query, facts):
        found = scored(query, facts).cosines or [None] * len(facts)
        return [c if c is not None else -1.0 for c in found]

    if name == "lexical":
        return lambda query, facts: (lexical_scores(query, facts), None)
    if name == "semantic":
        return lambda query, facts: (
            scored(query, facts).semantic or [0.0] * len(facts),
            scored(query, facts).cosines,
        )
    if name == "hybrid":
        return lambda query, facts: (scored(query, facts).scores, scored(query, facts).cosines)
    if name == "cosine":
        return lambda query, facts: (cosines(query, facts), None)
    raise ValueError(f"unknown scorer {name!r}; one of {', '.join(SCORERS)}")


def default_dataset_path() -> Path:
    return Path(settings.BASE_DIR) / "tests" / "memory" / "recall_set.py"


def default_paraphrase_path() -> Path:
    return Path(settings.BASE_DIR) / "tests" / "memory" / "recall_paraphrase_set.py"


def default_dev_path() -> Path:
    return Path(settings.BASE_DIR) / "tests" / "memory" / "recall_dev_set.py"


def load_dataset(path: str | Path | None = None) -> dict:
    data = runpy.run_path(str(path or default_dataset_path()))
    if "PARAPHRASES" not in data and path is None:
        data.update(runpy.run_path(str(default_paraphrase_path())))
    if "DEV_PARAPHRASES" not in data and path is None:
        data.update(runpy.run_path(str(default_dev_path())))
    return {
        "DEV_PARAPHRASES": data.get("DEV_PARAPHRASES", []),
        "DEV_UNRELATED": data.get("DEV_UNRELATED", []),
        "PARAPHRASES": data.get("PARAPHRASES", []),
        "PARAPHRASE_UNRELATED": data.get("PARAPHRASE_UNRELATED", []),
        "PARAPHRASE_CLOSE_UNRELATED": data.get("PARAPHRASE_CLOSE_UNRELATED", []),
        "FACTS": data["FACTS"],
        "QUERIES": data["QUERIES"],
        "UNRELATED": data.get("UNRELATED", []),
        # The unrelated questions that are plainly off-topic (the others are close to work):
        # every set's, by default the whole of the paraphrase set's first list.
        "OFF_TOPIC": {
            *data.get("UNRELATED_OFF_TOPIC", []),
            *data.get("DEV_UNRELATED_OFF_TOPIC", []),
            *data.get("PARAPHRASE_UNRELATED", []),
        },
        "HELD_OUT": data.get("HELD_OUT", []),
        "TASKS": data.get("TASKS", []),
    }


@dataclass
class QueryOutcome:
    agent: str
    query: str
    expected: set[str]
    picked: list[tuple[str, float]]  # (fact key, score), best first
    ranked: list[str] = field(default_factory=list)  # every fact of the agent, best first
    related: list[tuple[str, float]] = field(default_factory=list)  # the second tier

    @property
    def related_keys(self) -> set[str]:
        return {key for key, _ in self.related}

    @property
    def picked_keys(self) -> set[str]:
        return {key for key, _ in self.picked}

    @property
    def hits(self) -> set[str]:
        return self.expected & self.picked_keys

    @property
    def misses(self) -> set[str]:
        return self.expected - self.picked_keys

    @property
    def extras(self) -> set[str]:
        return self.picked_keys - self.expected


@dataclass
class SetFigures:
    outcomes: list[QueryOutcome] = field(default_factory=list)

    @property
    def picked(self) -> int:
        return sum(len(o.picked) for o in self.outcomes)

    @property
    def expected(self) -> int:
        return sum(len(o.expected) for o in self.outcomes)

    @property
    def hits(self) -> int:
        return sum(len(o.hits) for o in self.outcomes)

    @property
    def precision(self) -> float:
        return self.hits / self.picked if self.picked else 1.0

    @property
    def both_recall(self) -> float:
        """Recall of both tiers: the expected facts among the picks or the related ones."""
        found = sum(len(o.expected & (o.picked_keys | o.related_keys)) for o in self.outcomes)
        return found / self.expected if self.expected else 1.0

    @property
    def related(self) -> int:
        return sum(len(o.related) for o in self.outcomes)

    @property
    def recall(self) -> float:
        return self.hits / self.expected if self.expected else 1.0

    def r_at(self, k: int) -> float:
        """The share of queries with an expected fact among the first `k` of the ranking."""
        if not self.outcomes:
            return 1.0
        found = sum(bool(o.expected & set(o.ranked[:k])) for o in self.outcomes)
        return found / len(self.outcomes)


@dataclass
class Evaluation:
    threshold: float
    facts: int
    agents: int
    main: SetFigures
    held_out: SetFigures
    unrelated: list[QueryOutcome]  # one per (unrelated query, agent)
    scorer: str = "hybrid"
    paraphrases: SetFigures = field(default_factory=SetFigures)
    paraphrase_unrelated: list[QueryOutcome] = field(default_factory=list)
    tasks: SetFigures = field(default_factory=SetFigures)
    dev: SetFigures = field(default_factory=SetFigures)
    dev_unrelated: list[QueryOutcome] = field(default_factory=list)
    # The main and paraphrase sets with every question written in lower case, as people type
    # in a chat: case is all that tells a name from a common noun in a question.
    main_lower: SetFigures = field(default_factory=SetFigures)
    unrelated_lower: list[QueryOutcome] = field(default_factory=list)
    paraphrases_lower: SetFigures = field(default_factory=SetFigures)
    paraphrase_unrelated_lower: list[QueryOutcome] = field(default_factory=list)

    off_topic: set[str] = field(default_factory=set)

    @property
    def unrelated_hits(self) -> list[QueryOutcome]:
        return [o for o in self.unrelated if o.picked]

    def false_accepts(self, outcomes: list[QueryOutcome]) -> dict[str, int]:
        """What unrelated questions got, split: off-topic ones' picks in either tier (pairs
        of question and agent), close-to-work ones' first-tier and second-tier picks."""
        off_topic = self.off_topic | {q.lower() for q in self.off_topic}  # the "lc" sets too
        off = [o for o in outcomes if o.query in off_topic]
        close = [o for o in outcomes if o.query not in off_topic]
        return {
            "off_pairs": len(off),
            "off_picks": sum(len(o.picked) + len(o.related) for o in off),
            "close_pairs": len(close),
            "close_tier1": sum(len(o.picked) for o in close),
            "close_tier2": sum(len(o.related) for o in close),
        }


class _Fact(SimpleNamespace):
    """What scoring and picking read from a Note."""


def _facts_by_agent(facts: list[dict]) -> dict[str, list[_Fact]]:
    by_agent: dict[str, list[_Fact]] = defaultdict(list)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for i, fact in enumerate(facts):
        by_agent[fact["agent"]].append(
            _Fact(
                id=fact["key"],
                key=fact["key"],
                content=fact["text"],
                summary="",
                created_at=start + timedelta(minutes=i),
            )
        )
    # live_facts() hands recall the newest first; keep that order.
    return {agent: list(reversed(rows)) for agent, rows in by_agent.items()}


def _run(
    query: str, agent: str, facts: list[_Fact], threshold: float, scorer=None, related: int = 0
) -> QueryOutcome:
    scores, order = (scorer or _scorer("hybrid"))(query, facts)
    picked = pick(facts, scores, threshold, order)
    second = pick_related(facts, order, picked, related)
    # The whole ranking, as recall orders it: the picks as picked, then the rest the same way.
    rest = pick(facts, scores, float("-inf"), order)
    chosen = {p.note.key for p in picked}
    ranked = [p.note.key for p in picked] + [p.note.key for p in rest if p.note.key not in chosen]
    return QueryOutcome(
        agent=agent,
        query=query,
        expected=set(),
        picked=[(p.note.key, p.score) for p in picked],
        ranked=ranked,
        related=[(p.note.key, p.score) for p in second],
    )


def _check(dataset: dict, by_agent: dict[str, list[_Fact]]) -> None:
    keys = [f["key"] for f in dataset["FACTS"]]
    if len(keys) != len(set(keys)):
        raise ValueError("fact keys must be unique")
    agent_of = {f["key"]: f["agent"] for f in dataset["FACTS"]}
    for q in [
        *dataset["QUERIES"],
        *dataset["HELD_OUT"],
        *dataset.get("PARAPHRASES", []),
        *dataset.get("DEV_PARAPHRASES", []),
        *task_queries(dataset),
    ]:
        if q["agent"] not in by_agent:
            raise ValueError(f"query {q['query']!r} names an agent without facts")
        for key in q["expected"]:
            if agent_of.get(key) != q["agent"]:
                raise ValueError(f"query {q['query']!r} expects {key!r}, not a fact of its agent")


def task_queries(dataset: dict) -> list[dict]:
    """The set's run tasks as the queries a start recall scores them as (`Run.task_text`)."""
    return [
        {**q, "query": task_text(q["task"]["title"], q["task"].get("description") or "")}
        for q in dataset.get("TASKS", [])
    ]


def evaluate(
    dataset: dict,
    *,
    threshold: float | None = None,
    scorer: str = "hybrid",
    shared: dict | None = None,
    related: int | None = None,
) -> Evaluation:
    """Every set through `scorer`; the second tier takes up to `related` facts (the setting
    by default) where the scorer orders by meaning."""
    score = _scorer(scorer, shared)
    if threshold is None:
        threshold = recall_settings()["threshold"]
    if related is None:
        related = recall_settings()["related"]
    by_agent = _facts_by_agent(dataset["FACTS"])
    _check(dataset, by_agent)

    def run_set(queries: list[dict]) -> SetFigures:
        figures = SetFigures()
        for q in queries:
            outcome = _run(q["query"], q["agent"], by_agent[q["agent"]], threshold, score, related)
            outcome.expected = set(q["expected"])
            figures.outcomes.append(outcome)
        return figures

    def run_unrelated(queries: list[str]) -> list[QueryOutcome]:
        return [
            _run(query, agent, facts, threshold, score, related)
            for query in queries
            for agent, facts in sorted(by_agent.items())
        ]

    def lower(queries: list[dict]) -> list[dict]:
        return [{**q, "query": q["query"].lower()} for q in queries]

    paraphrase_unrelated = [
        *dataset.get("PARAPHRASE_UNRELATED", []),
        *dataset.get("PARAPHRASE_CLOSE_UNRELATED", []),
    ]

    return Evaluation(
        threshold=threshold,
        facts=len(dataset["FACTS"]),
        agents=len(by_agent),
        main=run_set(dataset["QUERIES"]),
        held_out=run_set(dataset["HELD_OUT"]),
        unrelated=run_unrelated(dataset["UNRELATED"]),
        scorer=scorer,
        paraphrases=run_set(dataset.get("PARAPHRASES", [])),
        paraphrase_unrelated=run_unrelated(paraphrase_unrelated),
        tasks=run_set(task_queries(dataset)),
        dev=run_set(dataset.get("DEV_PARAPHRASES", [])),
        dev_unrelated=run_unrelated(dataset.get("DEV_UNRELATED", [])),
        off_topic=set(dataset.get("OFF_TOPIC", ())),
        main_lower=run_set(lower(dataset["QUERIES"])),
        unrelated_lower=run_unrelated([q.lower() for q in dataset["UNRELATED"]]),
        paraphrases_lower=run_set(lower(dataset.get("PARAPHRASES", []))),
        paraphrase_unrelated_lower=run_unrelated([q.lower() for q in paraphrase_unrelated]),
    )


def format_comparison(evaluations: list[Evaluation]) -> str:
    """One line per scorer and set: the figures the three scorers are compared on."""
    out = [
        f"{'scorer':<9} {'set':<11} {'queries':>7} {'expected':>8} {'picked':>6} {'right':>5} "
        f"{'precision':>9} {'recall':>6} {'related':>7} {'both':>5} {'R@1':>5} {'R@5':>5} "
        f"{'off-topic':>10} {'close t1/t2':>12}"
    ]
    for ev in evaluations:
        rows = [
            ("main", ev.main, ev.unrelated),
            ("held-out", ev.held_out, None),
            ("paraphrase", ev.paraphrases, ev.paraphrase_unrelated),
            ("task", ev.tasks, None),
            ("dev", ev.dev, ev.dev_unrelated),
            ("main lc", ev.main_lower, ev.unrelated_lower),
            ("para lc", ev.paraphrases_lower, ev.paraphrase_unrelated_lower),
        ]
        for label, figures, unrelated in rows:
            if not figures.outcomes:
                continue
            off = close = ""
            if unrelated:
                fa = ev.false_accepts(unrelated)
                off = f"{fa['off_picks']}/{fa['off_pairs']}"
                close = f"{fa['close_tier1']}/{fa['close_tier2']} of {fa['close_pairs']}"
            out.append(
                f"{ev.scorer:<9} {label:<11} {len(figures.outcomes):>7} {figures.expected:>8} "
                f"{figures.picked:>6} {figures.hits:>5} {figures.precision:>9.3f} "
                f"{figures.recall:>6.3f} {figures.related:>7} {figures.both_recall:>5.3f} "
                f"{figures.r_at(1):>5.2f} {figures.r_at(5):>5.2f} {off:>10} {close:>12}"
            )
    out.append(
        "precision and recall: the first tier; related: second-tier picks; both: recall of "
        "both tiers; off-topic: picks in either tier / (question, agent) pairs; close t1/t2: "
        "close-to-work questions' picks in each tier; lc: the set's questions in lower case"
    )
    return "\n".join(out)


def _unrelated_pick(o: QueryOutcome) -> str:
    picked = ", ".join(f"{k} {s:.2f}" for k, s in o.picked)
    return f"  ! {o.agent}: {o.query!r} picked {picked}"


def format_report(ev: Evaluation, *, verbose: bool = False) -> str:
    out = [
        f"Recall quality ({ev.scorer}) at threshold {ev.threshold:.2f}: {ev.facts} facts of "
        f"{ev.agents} agents",
    ]

    def line(label: str, figures: SetFigures) -> str:
        return (
            f"{label:<10} queries {len(figures.outcomes):>3}  expected {figures.expected:>3}  "
            f"picked {figures.picked:>3}  right {figures.hits:>3}  "
            f"precision {figures.precision:.3f}  recall {figures.recall:.3f}"
        )

    out.append(line("main", ev.main))
    if ev.held_out.outcomes:
        out.append(line("held-out", ev.held_out))
    if ev.paraphrases.outcomes:
        out.append(line("paraphrase", ev.paraphrases))
    if ev.tasks.outcomes:
        out.append(line("task", ev.tasks))
    if ev.dev.outcomes:
        out.append(line("dev", ev.dev))
    queries = len({o.query for o in [*ev.unrelated, *ev.paraphrase_unrelated]})
    hits = ev.unrelated_hits + [o for o in ev.paraphrase_unrelated if o.picked]
    out.append(
        f"unrelated  queries {queries:>3}  checked against every agent: "
        f"{sum(len(o.picked) for o in hits)} facts picked"
    )
    out += [_unrelated_pick(o) for o in hits]
    if ev.dev_unrelated:
        dev_hits = [o for o in ev.dev_unrelated if o.picked]
        out.append(
            f"dev unrelated (half of them work-adjacent) queries "
            f"{len({o.query for o in ev.dev_unrelated}):>3}: "
            f"{sum(len(o.picked) for o in dev_hits)} facts picked"
        )
        out += [_unrelated_pick(o) for o in dev_hits]

    def table(label: str, figures: SetFigures) -> None:
        out.append("")
        out.append(f"{label} (+ right, - missed, ? not expected):")
        for o in figures.outcomes:
            mark = "ok  " if not o.misses and not o.extras else "FAIL"
            out.append(f"{mark} [{o.agent}] {o.query}")
            for key, score in o.picked:
                out.append(f"       {'+' if key in o.expected else '?'} {key} {score:.2f}")
            for key in sorted(o.misses):
                out.append(f"       - {key}")

    if verbose:
        table("Main set", ev.main)
        if ev.held_out.outcomes:
            table("Held-out set", ev.held_out)
        if ev.paraphrases.outcomes:
            table("Paraphrase set", ev.paraphrases)
        if ev.tasks.outcomes:
            table("Task set (start recall against the run's task)", ev.tasks)
        if ev.dev.outcomes:
            table("Development set", ev.dev)
    else:
        failed = [o for o in ev.main.outcomes if o.misses or o.extras]
        failed += [o for o in ev.paraphrases.outcomes if o.misses or o.extras]
        failed += [o for o in ev.tasks.outcomes if o.misses or o.extras]
        if failed:
            out.append("")
            out.append(f"main/paraphrase/task queries with a miss or an extra pick: {len(failed)}")
            for o in failed:
                miss = f" missed {', '.join(sorted(o.misses))}" if o.misses else ""
                extra = f" extra {', '.join(sorted(o.extras))}" if o.extras else ""
                out.append(f"  [{o.agent}] {o.query!r}:{miss}{extra}")
    return "\n".join(out)
