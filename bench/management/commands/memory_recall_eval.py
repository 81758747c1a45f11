"""`memory_recall_eval`: precision, recall, R@1 and R@5 of `recall()`'s scoring on the labelled
sets (tests/memory/recall_set.py by default), at the configured threshold, beside the bare
model's cosine ranking. docs/RECALL.md."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.test import override_settings

from bench import recall_eval as evaluation


class Command(BaseCommand):
    help = "Print the precision and recall of memory recall on a labelled set."

    def add_arguments(self, parser: CommandParser) -> None:
        default = evaluation.default_dataset_path()
        parser.add_argument(
            "--dataset",
            help=f"A Python file defining FACTS, QUERIES, UNRELATED, HELD_OUT (default {default}).",
        )
        parser.add_argument(
            "--threshold",
            type=float,
            default=None,
            help="Override MEMORY_PORTAL['RECALL_THRESHOLD'] for this run.",
        )
        parser.add_argument(
            "--scorer",
            choices=evaluation.SCORERS,
            default="hybrid",
            help="The scorer whose details are printed after the comparison (default hybrid).",
        )
        parser.add_argument(
            "--verbose", action="store_true", help="Print every query with its picks and misses."
        )

    def handle(
        self, *args, dataset=None, threshold=None, verbose=False, scorer="hybrid", **options
    ) -> None:
        try:
            data = evaluation.load_dataset(dataset)
        except (OSError, KeyError, SyntaxError) as exc:
            raise CommandError(f"cannot load the dataset: {exc}") from exc
        # The semantic and hybrid rows measure the embedding model whether or not this
        # deployment switched it on (MEMORY_EMBEDDINGS).
        portal = {**settings.MEMORY_PORTAL, "EMBEDDINGS_ENABLED": True}
        try:
            shared: dict = {}
            with override_settings(MEMORY_PORTAL=portal):
                evs = {
                    name: evaluation.evaluate(data, threshold=threshold, scorer=name, shared=shared)
                    for name in evaluation.SCORERS
                }
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(evaluation.format_comparison(list(evs.values())))
        self.stdout.write("")
        verbose = verbose or options.get("verbosity", 1) > 1
        self.stdout.write(evaluation.format_report(evs[scorer], verbose=verbose))
