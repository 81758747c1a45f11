"""`manage.py memory_delete_project PROJECT --confirm PROJECT`: delete a project with everything
in it, as the system, through the same service as the dashboard and the API; prints what went."""

from django.core.management.base import BaseCommand, CommandError

from memory_portal.memory import services
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.models import Project

from ._deletion import refusal, write_counts


class Command(BaseCommand):
    help = (
        "Delete a project and everything in it (notes, recoveries, scratchpads, applications, "
        "agents, runs, tokens, memberships). Irreversible; its audit events stay."
    )

    def add_arguments(self, parser):
        parser.add_argument("project", help="the project id (slug)")
        parser.add_argument(
            "--confirm", required=True, metavar="PROJECT", help="the project id again"
        )

    def handle(self, *args, project: str, confirm: str, **options):
        target = Project.objects.filter(slug=project).first()
        if target is None:
            raise CommandError(f"No project {project!r}.")
        try:
            counts = services.project_delete(actor=None, project=target, confirm=confirm)
        except MemoryPortalError as err:
            raise refusal(err) from err
        write_counts(self.stdout, f"Deleted project {project}:", counts)
