"""What the fault suite asserts over the recorded requests and the database afterwards, and the
table it prints. Every check is computed once from the records: nothing here retries."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from .load import Record

# The retryable 503s: nothing was written, the same call can be sent again (memory/errors.py).
RETRYABLE_CODES = {"memory_busy", "memory_timeout", "service_unavailable"}
OTHERS_P99_BOUND = 2.0  # seconds: writes to other projects while project A's lock is held


@dataclass
class Window:
    """When a fault was in effect, from its injection to a short grace after it ended."""

    name: str
    start: float
    end: float

    def overlaps(self, record: Record) -> bool:
        return record.started <= self.end and record.ended >= self.start


@dataclass
class Check:
    name: str
    passed: bool
    detail: str = ""


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def fmt_seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def envelope_problem(record: Record) -> str | None:
    """Why an error answer is not the retryable 503 of the contract, or None when it is."""
    if record.status != 503:
        return f"status {record.status}"
    error = record.body.get("error") if isinstance(record.body, dict) else None
    if not isinstance(error, dict):
        return "503 without the JSON error envelope"
    if error.get("code") not in RETRYABLE_CODES:
        return f"503 with code {error.get('code')!r}"
    for key in ("message", "hint"):
        if not isinstance(error.get(key), str) or not error[key]:
            return f"503 without {key}"
    if not record.headers.get("content-type", "").startswith("application/json"):
        return "503 not served as application/json"
    if not re.fullmatch(r"[1-9]\d*", record.headers.get("retry-after", "")):
        return "503 without a Retry-After of whole seconds"
    return None


class Outcome:
    """Each record set against what the database holds: content → [(id, project slug)]."""

    def __init__(self, records: list[Record], stored: dict[str, list[tuple[str, str]]]) -> None:
        self.records = records
        self.stored = stored

    def rows(self, record: Record) -> list[tuple[str, str]]:
        return self.stored.get(record.content, [])

    def stored_right(self, record: Record) -> bool:
        """Acknowledged: exactly one row, with the id answered. Refused: no row. No answer:
        at most one row (either outcome is allowed; which one is reported)."""
        rows = self.rows(record)
        if record.acknowledged:
            return len(rows) == 1 and rows[0][0] == record.body["id"]
        if record.status is not None:
            return not rows
        return len(rows) <= 1


def summarize(outcome: Outcome, records: list[Record]) -> list[str]:
    answered = [r.latency for r in records if r.status is not None]
    errors_503 = sum(r.status == 503 for r in records)
    errors_500 = sum(r.status is not None and r.status >= 500 and r.status != 503 for r in records)
    other = sum(
        r.status is not None and r.status != 200 and r.status < 500 for r in records
    ) + sum(r.status == 200 and not r.acknowledged for r in records)
    failures = [r for r in records if r.status is None]
    bad = sum(not outcome.stored_right(r) for r in records)
    stored_failures = sum(len(outcome.rows(r)) == 1 for r in failures)
    verdict = "ok" if not bad else f"{bad} WRONG"
    if failures:
        verdict += f" (unanswered: {stored_failures} stored, {len(failures) - stored_failures} not)"
    return [
        str(len(records)),
        str(sum(r.acknowledged for r in records)),
        str(errors_503),
        str(errors_500),
        str(other),
        str(len(failures)),
        fmt_seconds(percentile(answered, 0.50)),
        fmt_seconds(percentile(answered, 0.99)),
        verdict,
    ]


HEADER = [
    "scenario", "requests", "acked", "503", "5xx", "other", "no answer", "p50 s", "p99 s",
    "stored exactly once",
]


def phases(
    records: list[Record], windows: dict[str, Window], project_a: str
) -> list[tuple[str, list[Record]]]:
    """The table's rows: before any fault, each fault's window (the held lock split into project A
    and the others), between faults, after the last one, and everything."""
    first = min(w.start for w in windows.values())
    last = max(w.end for w in windows.values())
    lock = windows["held lock"]
    in_any: Callable[[Record], bool] = lambda r: any(w.overlaps(r) for w in windows.values())  # noqa: E731
    rows = [("baseline (before faults)", [r for r in records if r.ended < first])]
    for name, window in windows.items():
        if window is lock:
            continue
        rows.append((name, [r for r in records if window.overlaps(r)]))
    rows.append((f"held lock: {project_a}", [r for r in records
                 if lock.overlaps(r) and r.project == project_a]))
    rows.append(("held lock: other projects", [r for r in records
                 if lock.overlaps(r) and r.project != project_a]))
    rows.append(("between faults", [r for r in records
                 if r.ended >= first and r.started <= last and not in_any(r)]))
    rows.append(("after faults", [r for r in records if r.started > last]))
    rows.append(("all", list(records)))
    return rows


def render_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            str(c).ljust(w) if i == 0 or i == len(cells) - 1 else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def product_checks(
    outcome: Outcome,
    windows: dict[str, Window],
    project_a: str,
    marker_rows: list[tuple[str, str, str]],
) -> list[Check]:
    """The assertions about the product. `marker_rows`: every (id, content, project) the suite's
    marker finds in the notes table."""
    records = outcome.records
    checks: list[Check] = []
    first = min(w.start for w in windows.values())
    lock = windows["held lock"]
    kill = windows["worker kill -9"]
    in_any = {id(r) for r in records if any(w.overlaps(r) for w in windows.values())}

    baseline = [r for r in records if r.ended < first]
    refused = [r for r in baseline if not r.acknowledged]
    checks.append(Check(
        "before any fault every write is acknowledged",
        bool(baseline) and not refused,
        f"{len(baseline)} writes, {len(refused)} not acknowledged"
        + (f" (first: {describe(refused[0])})" if refused else ""),
    ))

    acked = [r for r in records if r.acknowledged]
    wrong = [r for r in acked if not outcome.stored_right(r)]
    checks.append(Check(
        "every acknowledged write is stored exactly once, under the id answered",
        not wrong,
        f"{len(acked)} acknowledged, {len(wrong)} wrong"
        + (f" (e.g. {len(outcome.rows(wrong[0]))} rows for one)" if wrong else ""),
    ))

    answered_errors = [r for r in records if r.status is not None and not r.acknowledged]
    leaked = [r for r in answered_errors if outcome.rows(r)]
    checks.append(Check(
        "nothing refused is stored",
        not leaked,
        f"{len(answered_errors)} refused, {len(leaked)} stored anyway"
        + (f" (first: {describe(leaked[0])})" if leaked else ""),
    ))

    failures = [r for r in records if r.status is None]
    doubled = [r for r in failures if len(outcome.rows(r)) > 1]
    stored_failures = sum(len(outcome.rows(r)) == 1 for r in failures)
    checks.append(Check(
        "each unanswered write is stored once or not at all",
        not doubled,
        f"{len(failures)} unanswered: {stored_failures} stored once, "
        f"{len(failures) - stored_failures - len(doubled)} not stored, {len(doubled)} stored twice"
        + (f" ({', '.join(sorted(Counter(r.failure for r in failures)))})" if failures else ""),
    ))

    crashes = [r for r in records if r.status is not None and r.status >= 500 and r.status != 503]
    checks.append(Check(
        "no 500 (or other 5xx but 503) answers",
        not crashes,
        f"{len(crashes)} seen" + (f" (first: {describe(crashes[0])})" if crashes else ""),
    ))

    malformed = [(r, envelope_problem(r)) for r in answered_errors]
    malformed = [(r, why) for r, why in malformed if why]
    reasons = Counter(why for _, why in malformed)
    codes = Counter(
        r.body["error"]["code"] for r in answered_errors
        if isinstance(r.body, dict) and isinstance(r.body.get("error"), dict)
    )
    checks.append(Check(
        "every error answer is a 503 JSON envelope (memory_busy | memory_timeout | "
        "service_unavailable) with Retry-After",
        not malformed,
        f"{len(answered_errors)} error answers, codes {dict(codes) or '{}'}; "
        f"{len(malformed)} off contract" + (f": {dict(reasons)}" if reasons else ""),
    ))

    outside = [r for r in answered_errors if id(r) not in in_any]
    checks.append(Check(
        "no error answers outside the fault windows",
        not outside,
        f"{len(outside)} seen" + (f" (first: {describe(outside[0])})" if outside else ""),
    ))

    stray_failures = [r for r in failures if not kill.overlaps(r)]
    checks.append(Check(
        "connections fail only while a worker is killed",
        not stray_failures,
        f"{len(failures)} unanswered, {len(stray_failures)} outside the kill window"
        + (f" (first: {describe(stray_failures[0])})" if stray_failures else ""),
    ))

    sent = {r.content for r in records}
    contents = Counter(content for _, content, _ in marker_rows)
    strays = [c for c in contents if c not in sent]
    dupes = [c for c, n in contents.items() if n > 1]
    checks.append(Check(
        "the notes table holds only what was sent, each content once",
        not strays and not dupes,
        f"{len(marker_rows)} rows, {len(strays)} never sent, {len(dupes)} duplicated",
    ))

    early = [
        r for r in records
        if r.project == project_a and r.acknowledged
        and r.started > lock.start and r.ended < lock.end - 0.5  # end: release + grace
    ]
    waits = [
        r.latency for r in records
        if r.project == project_a and lock.overlaps(r) and r.status == 503
    ]
    checks.append(Check(
        f"the held lock is honoured: no write to {project_a} started and acknowledged during it",
        not early,
        f"{len(early)} acknowledged inside the hold; {len(waits)} refused, answered after "
        f"p50 {fmt_seconds(percentile(waits, 0.5))} / max {fmt_seconds(percentile(waits, 1.0))} s",
    ))

    others_before = [
        r.latency for r in baseline if r.project != project_a and r.status is not None
    ]
    others_during = [
        r.latency for r in records
        if r.project != project_a and lock.overlaps(r) and r.status is not None
    ]
    p99 = percentile(others_during, 0.99)
    checks.append(Check(
        f"other projects are unaffected by {project_a}'s lock: p99 < {OTHERS_P99_BOUND:.0f} s",
        p99 is not None and p99 < OTHERS_P99_BOUND,
        f"before p50 {fmt_seconds(percentile(others_before, 0.5))} / p99 "
        f"{fmt_seconds(percentile(others_before, 0.99))} s; during the hold p50 "
        f"{fmt_seconds(percentile(others_during, 0.5))} / p99 {fmt_seconds(p99)} s "
        f"({len(others_during)} writes)",
    ))
    return checks


def bookkeeping_check(
    marker_rows: list[tuple[str, str, str]],
    revisions_before: dict[str, int],
    revisions_after: dict[str, int],
    audit_refs: list[tuple[str, str]],
) -> Check:
    """Each project's revision moved once per stored note, and each stored note has exactly one
    audit event (`audit_refs`: (project, note id) of the events written during the suite)."""
    per_project = Counter(project for _, _, project in marker_rows)
    drift = {
        p: (revisions_after.get(p, 0) - before, per_project.get(p, 0))
        for p, before in revisions_before.items()
        if revisions_after.get(p, 0) - before != per_project.get(p, 0)
    }
    ids = {note_id for note_id, _, _ in marker_rows}
    events = Counter(ref for _, ref in audit_refs)
    missing = [i for i in ids if events.get(i, 0) != 1]
    foreign = [ref for ref in events if ref not in ids]
    return Check(
        "revision moved once per stored note; one audit event per stored note",
        not drift and not missing and not foreign,
        f"revision drift {drift or 'none'}; {len(missing)} notes without exactly one event, "
        f"{len(foreign)} events for notes not stored",
    )


def vectors_check(stored: int, without_vector: int, waited: float) -> Check:
    """Every stored note has its vector, stored by the web processes after the writes'
    commits, off the request; what the killed worker had not stored yet is swept up by the
    worker that replaced it."""
    return Check(
        "every stored note gets its vector, off the request (the killed worker's too)",
        stored > 0 and not without_vector,
        f"{stored} stored; {without_vector} without a vector after {waited:.1f} s",
    )


def describe(record: Record) -> str:
    if record.status is None:
        return f"no answer ({record.failure}) after {record.latency:.2f} s"
    body = record.body
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        body = body["error"].get("code")
    return f"{record.status} {str(body)[:80]} after {record.latency:.2f} s to {record.project}"
