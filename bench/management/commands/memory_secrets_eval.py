"""`memory_secrets_eval`: detection and false-positive rates of the secret scanner on its
labelled corpus (both halves of tests/memory/ by default), beside the outside scanners that are
installed (detect-secrets, Kingfisher's rules alone, Betterleaks), and the time of a scan of a
2,000-character note. docs/SECRETS.md."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from bench.secrets_eval import (
    default_corpus_paths,
    evaluate_all,
    format_report,
    load_corpus,
    scan_timing,
)


class Command(BaseCommand):
    help = (
        "Print the secret scanner's detection and false-positive rates on each corpus, beside "
        "the outside scanners, and the time of one scan of a 2,000-character note."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--corpus",
            action="append",
            default=None,
            help="A Python file defining SECRETS and HARMLESS; repeat for several (default: "
            + ", ".join(str(p) for p in default_corpus_paths())
            + ").",
        )
        parser.add_argument(
            "--verbose",
            action="store_true",
            help="List every miss and false positive by entry, for each scanner.",
        )
        parser.add_argument(
            "--no-timing", action="store_true", help="Skip the timing of a 2,000-character note."
        )

    def handle(self, *args, corpus=None, verbose=False, no_timing=False, **options) -> None:
        paths = corpus or default_corpus_paths()
        verbose = verbose or options.get("verbosity", 1) > 1
        for index, path in enumerate(paths):
            try:
                data = load_corpus(path)
            except (OSError, KeyError, SyntaxError, ValueError) as exc:
                raise CommandError(f"cannot load the corpus: {exc}") from exc
            if index:
                self.stdout.write("")
            self.stdout.write(format_report(evaluate_all(data), corpus_path=path, verbose=verbose))
        if not no_timing:
            timing = scan_timing()
            self.stdout.write("")
            self.stdout.write(
                "Scan of a 2,000-character note, median ms: "
                + ", ".join(f"{name} {ms:.3f}" for name, ms in timing.items())
                + "."
            )
