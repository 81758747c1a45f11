"""`manage.py memory_export PROJECT > project.jsonl`: a project's memory as NDJSON (the format
of memory/portability/), streamed to standard output; never secrets or tokens."""

from django.core.management.base import BaseCommand, CommandError

from memory_portal.memory.models import Project
from memory_portal.memory.portability import project_export


class Command(BaseCommand):
    help = "Export a project's memory as NDJSON to standard output."

    def add_arguments(self, parser):
        parser.add_argument("project", help="the project id (slug)")

    def handle(self, *args, project: str, **options):
        target = Project.objects.filter(slug=project).first()
        if target is None:
            raise CommandError(f"No project {project!r}.")
        for line in project_export(actor=None, project=target):
            self.stdout.write(line, ending="")
