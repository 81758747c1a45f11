"""`manage.py memory_delete_application PROJECT APPLICATION --confirm APPLICATION`: delete an
application, as the system, through the same service as the dashboard and the API: the notes
scoped to it go, its agents and runs are detached. Prints what went and what was detached."""

from memory_portal.memory import services
from memory_portal.memory.models import Application

from ._deletion import DeleteCommand


class Command(DeleteCommand):
    help = (
        "Delete an application: the notes scoped to it, their recovery records and its "
        "repository links go; its agents and runs stay, detached. Irreversible."
    )
    ids = ("project", "application")

    def find(self, project: str, application: str) -> Application | None:
        return (
            Application.objects.filter(project__slug=project, slug=application)
            .select_related("project")
            .first()
        )

    def missing(self, project: str, application: str) -> str:
        return f"No application {application!r} in project {project!r}."

    def delete(self, target: Application, *, confirm: str) -> dict:
        return services.application_delete(actor=None, application=target, confirm=confirm)
