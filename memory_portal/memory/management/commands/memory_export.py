"""`manage.py memory_export PROJECT > project.jsonl`: a project's memory as NDJSON (the format
of memory/portability/), streamed to standard output; never secrets or tokens. The command
fails (exit status 1, saying so on standard error) unless the last line it wrote is the
export's end line, so a script never keeps a file that merely stopped."""

import json

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from memory_portal.memory.models import Project
from memory_portal.memory.portability import project_export
from memory_portal.memory.portability.export import ExportFailed
from memory_portal.memory.progress import Progress


class Command(BaseCommand):
    help = "Export a project's memory as NDJSON to standard output."

    def add_arguments(self, parser):
        parser.add_argument("project", help="the project id (slug)")

    def handle(self, *args, project: str, **options):
        target = Project.objects.filter(slug=project).first()
        if target is None:
            raise CommandError(f"No project {project!r}.")
        last, written = "", 0
        progress = Progress(f"exporting {target.slug}", unit="line", stream=self.stderr)
        try:
            for line in project_export(actor=None, project=target):
                self.stdout.write(line, ending="")
                last, written = line, written + 1
                progress.update()
        except (ExportFailed, DatabaseError) as exc:
            raise CommandError(
                f"the export failed after {written} lines ({type(exc.__cause__ or exc).__name__})"
                "; the output is incomplete: export again."
            ) from exc
        progress.close()
        if json.loads(last).get("type") != "end":
            raise CommandError(f"the export ended after {written} lines without its end line.")
