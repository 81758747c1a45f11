"""Dashboard views: parse, call one selector or service, render."""

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from memory_portal.memory import selectors


@login_required
def projects(request):
    rows = []
    for project in selectors.projects_for_user(user=request.user):
        setting = selectors.setting_get(project=project)
        rows.append(
            {
                "project": project,
                "setting": setting,
                "counts": selectors.project_counts(project=project),
            }
        )
    cap = settings.MEMORY_PORTAL["PROJECT_NOTE_CAP"]
    return render(request, "dashboard/projects.html", {"rows": rows, "cap": cap})
