"""`manage.py memory_delete_application PROJECT APPLICATION --confirm APPLICATION`: delete an
application, as the system, through the same service as the dashboard and the API: the notes
scoped to it go, its agents and runs are detached. Prints what went and what was detached."""

from django.core.management.base import BaseCommand, CommandError

from memory_portal.memory import services
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.models import Application

from ._deletion import refusal, write_counts


class Command(BaseCommand):
    help = (
        "Delete an application: the notes scoped to it, their recovery records and its "
        "repository links go; its agents and runs stay, detached. Irreversible."
    )

    def add_arguments(self, parser):
        parser.add_argument("project", help="the project id (slug)")
        parser.add_argument("application", help="the application id (slug)")
        parser.add_argument(
            "--confirm", required=True, metavar="APPLICATION", help="the application id again"
        )

    def handle(self, *args, project: str, application: str, confirm: str, **options):
        target = (
            Application.objects.filter(project__slug=project, slug=application)
            .select_related("project")
            .first()
        )
        if target is None:
            raise CommandError(f"No application {application!r} in project {project!r}.")
        try:
            counts = services.application_delete(actor=None, application=target, confirm=confirm)
        except MemoryPortalError as err:
            raise refusal(err) from err
        write_counts(self.stdout, f"Deleted application {project}/{application}:", counts)
