"""Dashboard URLs: one page per view, one POST URL per verb."""

from django.urls import path

from . import views

app_name = "dashboard"

P = "p/<slug:slug>/"
NOTE = P + "notes/<str:note_id>/"

urlpatterns = [
    path("", views.projects, name="projects"),
    path("audit/", views.audit, name="audit"),
    path(P, views.project_memory, name="project"),
    path(P + "memory/enable/", views.memory_enable, name="memory-enable"),
    path(P + "memory/disable/", views.memory_disable, name="memory-disable"),
    path(P + "memory/reset/", views.memory_reset, name="memory-reset"),
    path(P + "settings/", views.project_settings, name="settings"),
    path(P + "delete/", views.project_delete, name="project-delete"),
    path(
        P + "applications/<slug:app_slug>/delete/",
        views.application_delete,
        name="application-delete",
    ),
    path(P + "notes/bulk/", views.notes_bulk, name="notes-bulk"),
    path(NOTE, views.note_detail, name="note"),
    path(NOTE + "approve/", views.note_action, {"verb": "approve"}, name="note-approve"),
    path(NOTE + "reject/", views.note_action, {"verb": "reject"}, name="note-reject"),
    path(NOTE + "veto/", views.note_action, {"verb": "veto"}, name="note-veto"),
    path(NOTE + "undo/", views.note_action, {"verb": "undo"}, name="note-undo"),
    path(NOTE + "archive/", views.note_action, {"verb": "archive"}, name="note-archive"),
    path(NOTE + "unarchive/", views.note_action, {"verb": "unarchive"}, name="note-unarchive"),
    path(NOTE + "edit/", views.note_action, {"verb": "edit"}, name="note-edit"),
    path(NOTE + "forget/", views.note_action, {"verb": "forget"}, name="note-forget"),
    path(NOTE + "reverify/", views.note_action, {"verb": "reverify"}, name="note-reverify"),
    path(P + "recoveries/", views.recoveries, name="recoveries"),
    path(P + "recoveries/<str:recovery_id>/restore/", views.recovery_restore, name="restore"),
    path(P + "review/", views.review, name="review"),
    path(P + "review/lift/", views.day_line_lift, name="lift"),
    path(P + "agents/", views.agents, name="agents"),
    path(P + "agents/<str:agent_id>/", views.agent_detail, name="agent"),
    path(P + "agents/<str:agent_id>/facts/", views.agent_fact_save, name="agent-fact"),
    path(P + "agents/<str:agent_id>/recall/", views.agent_recall_preview, name="agent-recall"),
    path(
        P + "agents/<str:agent_id>/routine/<str:verb>/", views.agent_routine, name="agent-routine"
    ),
    path(P + "runs/", views.runs, name="runs"),
    path(P + "runs/<str:run_id>/", views.run_detail, name="run"),
    path(P + "runs/<str:run_id>/delete/", views.run_delete, name="run-delete"),
    path(P + "runs/<str:run_id>/revert/", views.run_revert, name="run-revert"),
    path(P + "runs/<str:run_id>/revert/undo/", views.run_revert_undo, name="run-revert-undo"),
]
