"""`memory_recall_eval`: precision and recall of `recall()`'s scoring on the labelled set
(tests/memory/recall_set.py by default), at the configured threshold. docs/RECALL.md."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory_portal.memory.recall_eval import (
    default_dataset_path,
    evaluate,
    format_report,
    load_dataset,
)


class Command(BaseCommand):
    help = "Print the precision and recall of memory recall on a labelled set."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dataset",
            default=None,
            help=f"A Python file defining FACTS, QUERIES, UNRELATED, HELD_OUT "
            f"(default {default_dataset_path()}).",
        )
        parser.add_argument(
            "--threshold",
            type=float,
            default=None,
            help="Override MEMORY_PORTAL['RECALL_THRESHOLD'] for this run.",
        )
        parser.add_argument(
            "--verbose", action="store_true", help="Print every query with its picks and misses."
        )

    def handle(self, *args, dataset=None, threshold=None, verbose=False, **options) -> None:
        try:
            data = load_dataset(dataset)
        except (OSError, KeyError, SyntaxError) as exc:
            raise CommandError(f"cannot load the dataset: {exc}") from exc
        try:
            ev = evaluate(data, threshold=threshold)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(format_report(ev, verbose=verbose or options.get("verbosity", 1) > 1))
