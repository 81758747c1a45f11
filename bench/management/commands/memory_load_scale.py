"""`memory_load_scale --notes N`: grow the PostgreSQL database to N notes in projects of 2,000
(bench/scale.py). Idempotent: a second call with the same N loads nothing. Progress goes to
stderr: a bar on a terminal, a line every few seconds otherwise."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from bench.scale import load_scale, scale_notes
from memory_portal.memory.progress import Progress


class Command(BaseCommand):
    help = "Grow the database to N notes of realistic shape (PostgreSQL only)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--notes", type=int, required=True, help="notes the database holds")
        parser.add_argument("--seed", type=int, default=1)

    def handle(self, *args, notes: int, seed: int, **options) -> None:
        if connection.vendor != "postgresql":
            raise CommandError(
                "memory_load_scale needs PostgreSQL: set DATABASE_URL=postgres://… (SQLite is "
                "not a target for a million notes)."
            )
        if notes < 0:
            raise CommandError("--notes must be 0 or more.")

        before = scale_notes()
        with Progress(
            "loading notes", total=max(notes - before, 0), unit="note", stream=self.stderr
        ) as bar:

            def progress(done: int, seconds: float) -> None:
                bar.update(done - before - bar.done)

            result = load_scale(notes=notes, seed=seed, progress=progress)
        if not result.loaded:
            self.stdout.write(f"The database holds {result.after:,} notes already; nothing loaded.")
            return
        self.stdout.write(
            f"Loaded {result.loaded:,} notes in {result.projects} projects in "
            f"{result.seconds:.1f} s ({result.rate:,.0f} notes/s); the database holds "
            f"{result.after:,} notes."
        )
