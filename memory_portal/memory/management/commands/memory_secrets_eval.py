"""`memory_secrets_eval`: detection and false-positive rates of the secret scanner on its
labelled corpus (tests/memory/secrets_set.py by default), beside detect-secrets.
docs/SECRETS.md."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory_portal.memory.secrets_eval import (
    default_corpus_path,
    evaluate_detect_secrets,
    evaluate_ours,
    format_report,
    load_corpus,
)


class Command(BaseCommand):
    help = "Print the secret scanner's detection and false-positive rates, beside detect-secrets."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--corpus",
            default=None,
            help=f"A Python file defining SECRETS and HARMLESS (default {default_corpus_path()}).",
        )
        parser.add_argument(
            "--verbose",
            action="store_true",
            help="List every miss and false positive by entry, for each scanner.",
        )

    def handle(self, *args, corpus=None, verbose=False, **options) -> None:
        try:
            data = load_corpus(corpus)
        except (OSError, KeyError, SyntaxError, ValueError) as exc:
            raise CommandError(f"cannot load the corpus: {exc}") from exc
        results = [evaluate_ours(data)]
        theirs = evaluate_detect_secrets(data)
        if theirs is not None:
            results.append(theirs)
        self.stdout.write(
            format_report(
                results,
                corpus_path=corpus or default_corpus_path(),
                verbose=verbose or options.get("verbosity", 1) > 1,
            )
        )
