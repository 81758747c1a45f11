"""The demo's scenarios, read from scenarios.json: projects, workflows, note texts and the git
repository that evidence points into."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError

SCENARIOS = Path(__file__).with_name("scenarios.json")

# Trace names of the v1 routes, as the API records them (memory_portal/api/v1.py url names);
# the tool names are SPEC §2.10's.
TRACE_V1_SAVE = "v1-save"
TRACE_V1_DAY = "v1-day"
TRACE_V1_ARCHIVE = "v1-archive"


@dataclass(frozen=True)
class Workflow:
    """One top-level run and its nested runs: (agent stage, parent index, final status)."""

    when: float  # days ago for past workflows; fraction of today so far for today's
    hour: int
    task_key: str
    runs: tuple[tuple[str, int | None, str], ...]
    today: bool = False
    evidence: bool = False


@dataclass(frozen=True)
class EvidenceNote:
    """A note bound to a file (and maybe a quote) of the repository's first commit."""

    kind: str
    content: str
    path: str
    quote: str | None


@dataclass(frozen=True)
class ProjectSpec:
    slug: str
    name: str
    apps: tuple[tuple[str, str], ...]
    agents: tuple[tuple[str, str, str], ...]  # (stage, name, application slug)
    vocabulary: dict[str, tuple[tuple[str, ...], ...]]  # category: rows of template fields
    pool_notes: int
    past: tuple[Workflow, ...]
    today: tuple[Workflow, ...]
    facts: tuple[str, ...]
    expiring_facts: tuple[str, ...]
    fact_revisions: tuple[tuple[str, str, str], ...]  # (agent stage, old text, new text)
    person_fact: tuple[str, str]  # (agent stage, text) saved by the demo user
    evidence_notes: tuple[EvidenceNote, ...] = ()
    day_lines: tuple[str, ...] = ()
    scratchpad: tuple[str, ...] = ()
    repo_link_app: str = ""
    enabled_days_ago: int = 30
    edits: int = 1


@dataclass(frozen=True)
class NoteText:
    kind: str
    content: str
    summary: str
    tags: tuple[str, ...]
    category: str


@dataclass(frozen=True)
class Scenario:
    """Everything the loader plays, as read from the data file."""

    seed: int
    repo_slug: str
    # (message, date, {path: text}); fixed dates and identity give the same SHAs on every load.
    repo_commits: tuple[tuple[str, str, dict[str, str]], ...]
    # category: (kind, content, summary, tags); {f0}… are a vocabulary row's fields, {F0}…
    # the same capitalised.
    templates: dict[str, tuple[tuple[str, str, str, tuple[str, ...]], ...]]
    extra_tags: dict[str, tuple[str, ...]]
    steps: tuple[str, ...]
    agent_archive_reasons: tuple[str, ...]
    person_archive_reasons: tuple[str, ...]
    projects: tuple[ProjectSpec, ...]


def _tuples(rows) -> tuple:
    return tuple(tuple(row) for row in rows)


def _workflow(raw: dict, *, today: bool) -> Workflow:
    return Workflow(
        when=raw["when"],
        hour=raw.get("hour", 0),
        task_key=raw["task_key"],
        runs=_tuples(raw["runs"]),
        today=today,
        evidence=raw.get("evidence", False),
    )


def _project(raw: dict) -> ProjectSpec:
    return ProjectSpec(
        slug=raw["slug"],
        name=raw["name"],
        apps=_tuples(raw["apps"]),
        agents=_tuples(raw["agents"]),
        vocabulary={category: _tuples(rows) for category, rows in raw["vocabulary"].items()},
        pool_notes=raw["pool_notes"],
        past=tuple(_workflow(w, today=False) for w in raw["past"]),
        today=tuple(_workflow(w, today=True) for w in raw["today"]),
        facts=tuple(raw["facts"]),
        expiring_facts=tuple(raw["expiring_facts"]),
        fact_revisions=_tuples(raw["fact_revisions"]),
        person_fact=tuple(raw["person_fact"]),
        evidence_notes=tuple(EvidenceNote(**note) for note in raw["evidence_notes"]),
        day_lines=tuple(raw["day_lines"]),
        scratchpad=tuple(raw["scratchpad"]),
        repo_link_app=raw["repo_link_app"],
        enabled_days_ago=raw["enabled_days_ago"],
        edits=raw["edits"],
    )


def _files(files: dict[str, list[str]]) -> dict[str, str]:
    # A file is stored as its list of lines; each file ends with a newline.
    return {name: "".join(f"{line}\n" for line in lines) for name, lines in files.items()}


@cache
def load_scenario(path: Path = SCENARIOS) -> Scenario:
    raw = json.loads(path.read_text(encoding="utf-8"))
    repository = raw["repository"]
    return Scenario(
        seed=raw["seed"],
        repo_slug=repository["slug"],
        repo_commits=tuple(
            (commit["message"], commit["date"], _files(commit["files"]))
            for commit in repository["commits"]
        ),
        templates={
            category: tuple((t["kind"], t["content"], t["summary"], tuple(t["tags"])) for t in rows)
            for category, rows in raw["templates"].items()
        },
        extra_tags={category: tuple(tags) for category, tags in raw["extra_tags"].items()},
        steps=tuple(raw["steps"]),
        agent_archive_reasons=tuple(raw["agent_archive_reasons"]),
        person_archive_reasons=tuple(raw["person_archive_reasons"]),
        projects=tuple(_project(p) for p in raw["projects"]),
    )


def _cap(text: str) -> str:
    """Capitalise a sentence start, but leave identifiers such as test_settlement_cutoff alone."""
    first = text.split(" ", 1)[0]
    if "_" in first or "/" in first or "." in first:
        return text
    return text[:1].upper() + text[1:]


def build_pool(scenario: Scenario, spec: ProjectSpec, rng: random.Random) -> list[NoteText]:
    """Every template of a category filled with every row of the project's vocabulary."""
    pool: list[NoteText] = []
    seen: set[str] = set()
    for category, rows in spec.vocabulary.items():
        for row in rows:
            values = {f"f{i}": v for i, v in enumerate(row)}
            values.update({f"F{i}": _cap(v) for i, v in enumerate(row)})
            for kind, content, summary, tags in scenario.templates[category]:
                text = content.format(**values)
                if text in seen:
                    continue
                seen.add(text)
                pool.append(
                    NoteText(kind, text, _cap(summary.format(**values))[:240], tags, category)
                )
    rng.shuffle(pool)
    return pool


def build_repository(repo_dir: Path, scenario: Scenario | None = None) -> tuple[str, str]:
    """A working git repository with the scenario's two commits, built with the git binary;
    returns the two commit SHAs (the same on every build)."""
    scenario = scenario or load_scenario()
    if repo_dir.exists():
        shutil.rmtree(repo_dir)
    repo_dir.mkdir(parents=True)
    git = settings.MEMORY_PORTAL["GIT_BINARY"]
    # The developer's own git config (signing, hooks, templates) must not leak in.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="ERP Team",
        GIT_AUTHOR_EMAIL="erp-team@example.com",
        GIT_COMMITTER_NAME="ERP Team",
        GIT_COMMITTER_EMAIL="erp-team@example.com",
        GIT_TERMINAL_PROMPT="0",
    )

    def run_git(*args: str, date: str = "") -> str:
        extra = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date} if date else {}
        result = subprocess.run(
            [git, "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *args],
            cwd=repo_dir,
            env={**env, **extra},
            capture_output=True,
            check=False,
            timeout=30,
        )
        if result.returncode != 0:
            raise CommandError(f"git {args[0]} failed: {result.stderr.decode().strip()}")
        return result.stdout.decode().strip()

    run_git("init", "-q")
    shas = []
    for message, date, files in scenario.repo_commits:
        for name, text in files.items():
            target = repo_dir / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        run_git("add", "-A")
        run_git("commit", "-q", "-m", message, date=date)
        shas.append(run_git("rev-parse", "HEAD"))
    return shas[0], shas[1]
