"""Dashboard URLs: one page per view, one POST URL per verb; a project's below `p/<slug>/`,
grouped by what they are about."""

from django.urls import include, path

from . import views
from .views.actions import NOTE_VERBS

app_name = "dashboard"

memory_urls = [
    path("enable/", views.memory_enable, name="memory-enable"),
    path("disable/", views.memory_disable, name="memory-disable"),
    path("reset/", views.memory_reset, name="memory-reset"),
    path("policy/", views.memory_policy, name="memory-policy"),
]

# One URL per row action of NOTE_VERBS: `note-approve`, `note-forget`, …
note_urls = [
    path("", views.note_detail, name="note"),
    # A row's edit or archive panel, loaded when it is opened (GET; its form posts the verb).
    path("<str:verb>/form/", views.note_panel, name="note-panel"),
] + [
    path(f"{verb}/", views.note_action, {"verb": verb}, name=f"note-{verb}") for verb in NOTE_VERBS
]

agent_urls = [
    path("", views.agent_detail, name="agent"),
    path("facts/", views.agent_fact_save, name="agent-fact"),
    path("recall/", views.agent_recall_preview, name="agent-recall"),
    path("routine/<str:verb>/", views.agent_routine, name="agent-routine"),
    path("keys/<str:key_id>/seen/", views.key_seen, name="key-seen"),
    path("change/<str:verb>/", views.agent_change, name="agent-change"),
]

run_urls = [
    path("", views.run_detail, name="run"),
    path("status/", views.run_status, name="run-status"),
    path("delete/", views.run_delete, name="run-delete"),
    path("revert/", views.run_revert, name="run-revert"),
    path("revert/undo/", views.run_revert_undo, name="run-revert-undo"),
]

project_urls = [
    path("", views.project_memory, name="project"),
    path("memory/", include(memory_urls)),
    path("overview/", views.overview, name="overview"),
    path("settings/", views.project_settings, name="settings"),
    path("webhooks/", views.webhook_create, name="webhook-create"),
    path("webhooks/<str:webhook_id>/<str:verb>/", views.webhook_action, name="webhook-action"),
    path(
        "webhooks/<str:webhook_id>/deliveries/<str:delivery_id>/retry/",
        views.delivery_retry,
        name="delivery-retry",
    ),
    path("export/", views.project_export, name="export"),
    path("delete/", views.project_delete, name="project-delete"),
    path(
        "applications/<slug:app_slug>/delete/", views.application_delete, name="application-delete"
    ),
    # `notes/bulk/` and `notes/reach/` before a note's URLs, which would take them for note ids
    path("notes/bulk/", views.notes_bulk, name="notes-bulk"),
    path("notes/reach/", views.notes_reach, name="notes-reach"),
    path("notes/<str:note_id>/", include(note_urls)),
    path("recoveries/", views.recoveries, name="recoveries"),
    path("recoveries/<str:recovery_id>/restore/", views.recovery_restore, name="restore"),
    path("review/", views.review, name="review"),
    path("review/lift/", views.day_line_lift, name="lift"),
    path("agents/", views.agents, name="agents"),
    path("agents/new/", views.agent_create, name="agent-create"),
    path("connect/", views.connect, name="connect"),
    path("members/", views.members, name="members"),
    path("members/add/", views.member_add, name="member-add"),
    path("members/invite/", views.member_invite, name="member-invite"),
    path("members/<str:username>/<str:verb>/", views.member_change, name="member-change"),
    path("agents/<str:agent_id>/", include(agent_urls)),
    path("runs/", views.runs, name="runs"),
    path("runs/<str:run_id>/", include(run_urls)),
]

urlpatterns = [
    path("", views.projects, name="projects"),
    path("projects/new/", views.project_create, name="project-create"),
    path("people/", views.people, name="people"),
    path("people/<str:username>/<str:verb>/", views.person_change, name="person-change"),
    path("audit/", views.audit, name="audit"),
    path("import/", views.import_page, name="import"),
    path("import/check/", views.import_check, name="import-check"),
    path("import/run/", views.import_run, name="import-run"),
    path("tokens/", views.tokens, name="tokens"),
    path("notifications/", views.notifications, name="notifications"),
    path("notifications/p/<slug:slug>/", views.notifications_set, name="notifications-set"),
    path("notifications/unsubscribe/<str:token>/", views.unsubscribe, name="unsubscribe"),
    path("tokens/<str:prefix>/revoke/", views.token_revoke, name="token-revoke"),
    path("p/<slug:slug>/", include(project_urls)),
]
