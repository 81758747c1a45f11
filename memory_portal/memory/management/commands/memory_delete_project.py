"""`manage.py memory_delete_project PROJECT --confirm PROJECT`: delete a project with everything
in it, as the system, through the same service as the dashboard and the API; prints what went."""

from memory_portal.memory import services
from memory_portal.memory.models import Project

from ._deletion import DeleteCommand


class Command(DeleteCommand):
    help = (
        "Delete a project and everything in it (notes, recoveries, scratchpads, applications, "
        "agents, runs, tokens, memberships). Irreversible; its audit events stay."
    )
    ids = ("project",)

    def find(self, project: str) -> Project | None:
        return Project.objects.filter(slug=project).first()

    def missing(self, project: str) -> str:
        return f"No project {project!r}."

    def delete(self, target: Project, *, confirm: str) -> dict:
        return services.project_delete(actor=None, project=target, confirm=confirm)
