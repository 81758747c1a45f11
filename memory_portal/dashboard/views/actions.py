"""Changes to notes from the dashboard: one service call per change (a row action, a restore, a
bulk action, a fact saved or lifted), answered with the changed rows and the counters."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.http import Http404, HttpResponse, JsonResponse
from django.middleware.csrf import get_token
from django.shortcuts import redirect, render
from django.template import engines
from django.urls import reverse
from django.utils.html import format_html

from memory_portal.memory import selectors, services
from memory_portal.memory.access import note_actions
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.validation import ARCHIVE_REASON_MAX

from ..forms import (
    BULK_ACTIONS,
    BULK_UNDO_ONLY,
    ArchiveForm,
    BulkForm,
    EditForm,
    FactForm,
    LiftForm,
    ReasonForm,
)
from ..templatetags.fast_url import PlainReverser
from .base import (
    SECTION_KEYS,
    actor_of,
    done,
    form_refused,
    next_url,
    not_found_edge,
    note_ids_of,
    project_action,
    project_context,
    project_page,
    refusal,
    refusal_edge,
    rows_response,
    toast,
)
from .pages import agent_of, agent_page


@dataclass(frozen=True)
class NoteVerb:
    """A row action on a note (its service: services.NOTE_VERBS): the form its POST must pass
    (the form's fields are the service's further arguments) and what the person is told (from
    the note's name, as a person reads it, and the service's result)."""

    message: Callable[[str, Any], str]
    form: type[forms.Form] | None = None


NOTE_VERBS = {
    "approve": NoteVerb(lambda name, _: f"Approved {name}: agents see it as reviewed."),
    "reject": NoteVerb(
        lambda name, _: f"Rejected {name}: agents will not be served it.", ReasonForm
    ),
    "unreview": NoteVerb(lambda name, _: f"{name} awaits review again."),
    "veto": NoteVerb(lambda name, _: f"Vetoed {name}.", ReasonForm),
    "undo": NoteVerb(lambda name, _: f"{name} is active again."),
    "unarchive": NoteVerb(lambda name, _: f"{name} is active again."),
    "archive": NoteVerb(lambda name, _: f"Archived {name}.", ArchiveForm),
    "edit": NoteVerb(
        lambda name, result: (
            f"Saved the edit as {name}; the old text is archived as superseded."
            if result.created
            else f"That text is already live as {note_name(result.note)}."
        ),
        EditForm,
    ),
    "forget": NoteVerb(lambda name, _: f"Forgot {name}."),
    "reverify": NoteVerb(
        lambda name, note: f"Evidence of {name} re-verified at {note.evidence_commit[:10]}.",
    ),
}
assert NOTE_VERBS.keys() == services.NOTE_VERBS.keys(), "a row action for every note verb"
BULK_LABELS = {**BULK_ACTIONS, **BULK_UNDO_ONLY}
BULK_UNDO = {"veto": "undo", "forget": "restore"}  # what a bulk toast's Undo sends


def note_name(note) -> str:
    """A note as a person reads it in a message: its summary, else the start of its text."""
    text = " ".join((note.summary or note.content).split())
    return f"“{text[:57] + '…' if len(text) > 60 else text}”"


def _changed_note(result):
    """The note a verb's service changed, from what it answered (a note, a recovery record
    of the forgotten note, or an edit's write result: the note it replaced is its `supersedes`)."""
    if isinstance(result, services.notes.WriteResult):
        return result.note
    return getattr(result, "note", result)


# The verb that sets a trust back (the Undo of an approve, a reject or an unreview).
TRUST_UNDO = {"learned": "unreview", "reviewed": "approve", "rejected": "reject"}


def _undo(request, access, verb: str, note_id: str, result) -> dict | None:
    """The toast's Undo of every reversible decision: a veto (the note's undo), a forget (its
    restore), an approve or a reject (the trust it had before, when it changed)."""
    slug = access.project.slug
    if verb == "veto":
        return {"url": reverse("dashboard:note-undo", args=[slug, note_id]), "label": "Undo"}
    if verb == "forget":
        return {"url": reverse("dashboard:restore", args=[slug, result.pk]), "label": "Undo"}
    if verb in ("approve", "reject", "unreview") and result.trust_before != result.trust:
        back = TRUST_UNDO[result.trust_before]
        return {"url": reverse(f"dashboard:note-{back}", args=[slug, note_id]), "label": "Undo"}
    return None


TOLD_REACH = ("veto", "reject", "forget")  # verbs whose toast names who had been served the notes


def _reach_told(access, verb: str, note_ids: list[str]) -> tuple[str, dict | None]:
    """After a veto, a reject or a forget: the runs served the notes in the last 30 days (the
    blast radius the rows showed before the click), said in the toast with a link to those
    runs. ("", None) for other verbs and for notes nobody read."""
    if verb not in TOLD_REACH:
        return "", None
    reach = selectors.reach_of(note_ids)
    if not reach.runs:
        return "", None
    url = reverse("dashboard:runs", args=[access.project.slug])
    query = urlencode([("read", note_id) for note_id in note_ids])
    label = "See the run" if reach.runs == 1 else f"See the {reach.runs} runs"
    told = f" {'It was' if len(note_ids) == 1 else 'They were'} {reach.sentence()}"
    return told, {"url": f"{url}?{query}", "label": label}


MORE_VERBS = ("edit", "archive", "forget")  # a row's "More" panel; the review's verbs are buttons


@project_page
def note_panel(request, access, note_id, verb):
    """A note row's "More" panel, loaded when it is first opened
    (templates/jinja2/dashboard/note_panel.html): a form for each of edit, archive and forget
    the rule lets the person do (access.note_actions). Its forms return to the page it was
    opened on; a request that is not htmx's goes to the note's page, which has them all."""
    if verb != "more":
        raise Http404("No such panel.")
    note = selectors.note_get(actor=actor_of(request), note_id=note_id, project=access.project)
    if not request.htmx:
        return redirect("dashboard:note", access.project.slug, note.pk)
    allowed = note_actions(note, manager=access.is_manager)
    verbs = [v for v in MORE_VERBS if v in allowed]
    if not verbs:
        raise Http404("Nothing to do to this note here.")
    section = request.GET.get("section", "")
    note_url = reverse("dashboard:note", args=[access.project.slug, note.pk])
    panel = engines["jinja2"].env.get_template("dashboard/note_panel.html")
    return HttpResponse(
        panel.render(
            note=note,
            verbs=verbs,
            project=access.project,
            url=PlainReverser(),
            csrf_input=format_html(
                '<input type="hidden" name="csrfmiddlewaretoken" value="{}">', get_token(request)
            ),
            section=section if section in SECTION_KEYS else "",
            next=request.htmx.current_url_abs_path or note_url,
            reason_max=ARCHIVE_REASON_MAX,
            reach=selectors.reach_of([note.pk]) if "forget" in verbs else None,
        )
    )


@project_action
@refusal_edge
def note_action(request, access, note_id, verb):
    """One row action of NOTE_VERBS (each URL names its verb). The service loads the note of
    this project and authorises the person, once, under the project's lock; the answer is the
    changed row (an edit: both rows), the counters and a toast naming the note, with Undo for
    a veto or a forget."""
    action = NOTE_VERBS[verb]
    arguments: dict = {}
    if action.form is not None:
        form = action.form(request.POST)
        if not form.is_valid():
            return form_refused(request, access, form)
        arguments = form.cleaned_data
    result = services.NOTE_VERBS[verb](
        actor=actor_of(request), note_id=note_id, project=access.project, **arguments
    )
    changed = [note_id]
    if isinstance(result, services.notes.WriteResult):
        changed = [result.note.pk, note_id]  # an edit: the new note and the one it replaced
    note = _changed_note(result)
    told, link = _reach_told(access, verb, [note_id])
    return rows_response(
        request,
        access,
        note_ids=changed,
        message=action.message(note_name(note), result) + told,
        fresh=False,
        undo=_undo(request, access, verb, note_id, result),
        link=link,
    )


@project_action
@refusal_edge
def recovery_restore(request, access, recovery_id):
    actor = actor_of(request)
    recovery = selectors.recovery_in_project(
        actor=actor, project=access.project, recovery_id=recovery_id
    )
    note = services.note_restore(actor=actor, recovery_id=recovery.pk)
    message = f"Restored {note_name(note)} ({note.status})."
    if request.htmx and request.POST.get("from") == "recoveries":
        context = {**project_context(access, fresh=True), "recovery": recovery, "restored": note}
        response = render(request, "dashboard/recoveries.html#recovery_response", context)
        return toast(response, "success", message)
    return rows_response(request, access, note_ids=[note.pk], message=message)


@project_page
def notes_reach(request, access):
    """The bulk bar's blast radius of the selected notes (`?ids=`, repeated): who was served
    any of them in the last 30 days: `{"runs", "said"}`, the line portal.js shows in the bar and
    in the bulk veto, reject or forget's question. Only notes of this project count."""
    wanted = note_ids_of(request, "ids")
    ids = list(
        selectors.notes_table_ids(actor=actor_of(request), project=access.project)
        .filter(pk__in=wanted)
        .values_list("pk", flat=True)
    )
    reach = selectors.reach_of(ids) if ids else None
    if reach and reach.runs:
        said = f"{'The selected note was' if len(ids) == 1 else 'The selected notes were'} "
        said += reach.sentence()
    else:
        said = "No run was served the selected notes in the last 30 days." if ids else ""
    return JsonResponse({"runs": reach.runs if reach else 0, "said": said})


@project_action
def notes_bulk(request, access):
    """The same service call for each selected note; what was refused is reported, the rest
    is done. A bulk veto's toast undoes it (undo), a bulk forget's restores the notes."""
    form = BulkForm(request.POST)
    if not form.is_valid():
        return form_refused(request, access, form)
    actor = actor_of(request)
    verb = form.cleaned_data["action"]
    wanted = form.cleaned_data["ids"]
    in_project = set(
        selectors.notes_table_ids(actor=actor, project=access.project)
        .filter(pk__in=wanted)
        .values_list("pk", flat=True)
    )
    if verb == "restore":
        recoveries = dict(
            selectors.recoveries_for_actor(actor=actor, project=access.project)
            .filter(note_id__in=wanted)
            .values_list("note_id", "pk")
        )

        def act(note_id):
            if note_id not in recoveries:
                raise MemoryPortalError("memory_recovery_not_found", "it is not forgotten")
            services.note_restore(actor=actor, recovery_id=recoveries[note_id])
    else:

        def act(note_id):
            services.NOTE_VERBS[verb](actor=actor, note_id=note_id)

    changed: list[str] = []
    refusals: list[str] = []
    for note_id in wanted:
        if note_id not in in_project:
            refusals.append(f"{note_id}: not found")
            continue
        try:
            act(note_id)
        except MemoryPortalError as err:
            refusals.append(f"{note_id}: {err.message}")
        else:
            changed.append(note_id)
    label = BULK_LABELS[verb]
    told, link = _reach_told(access, verb, changed)
    message = f"{label}: {len(changed)} of {len(wanted)} notes.{told}"
    if refusals:
        message += f" Could not {label.lower()} {len(refusals)}: " + "; ".join(refusals[:5])
    if not changed:
        return refusal(request, message, to=next_url(request, access))
    if not request.htmx:
        level = messages.warning if refusals else messages.success
        return done(request, next_url(request, access), message, level=level)
    undo = None
    if verb in BULK_UNDO:
        url = reverse("dashboard:notes-bulk", args=[access.project.slug])
        undo = {"url": url, "label": "Undo", "values": {"action": BULK_UNDO[verb], "ids": changed}}
    response = rows_response(
        request, access, note_ids=changed, message=message, oob=True, undo=undo, link=link
    )
    if refusals:
        response = toast(response, "warning", message)
    return response


@project_action
def agent_fact_save(request, access, agent_id):
    actor = actor_of(request)
    agent = agent_of(request, access, agent_id)
    form = FactForm(request.POST)
    if not form.is_valid():
        return agent_page(request, access, agent, fact_form=form, status=400)
    try:
        result = services.fact_save(actor=actor, agent_id=agent.pk, text=form.cleaned_data["text"])
    except MemoryPortalError as err:
        not_found_edge(err)
        form.add_error("text", f"{err.message} {err.hint}")
        return agent_page(request, access, agent, fact_form=form, status=400)
    if result.created:
        messages.success(request, f"Saved {result.note.pk} for {agent.name}.")
    else:
        messages.info(request, f"{agent.name} already keeps this fact as {result.note.pk}.")
    return redirect(reverse("dashboard:agent", args=[access.project.slug, agent.pk]))


@project_action
@refusal_edge
def day_line_lift(request, access):
    """Lift one of yesterday's day-log lines into a fact of the same agent."""
    actor = actor_of(request)
    form = LiftForm(request.POST)
    if not form.is_valid():
        return form_refused(request, access, form)
    line = selectors.day_line_get(
        actor=actor,
        project=access.project,
        note_id=form.cleaned_data["note"],
        index=form.cleaned_data["line"],
    )
    result = services.fact_save(actor=actor, agent_id=line.note.owner_agent_id, text=line.text)
    agent_name = line.note.owner_agent.name
    message = (
        f"Saved {result.note.pk} as a fact of {agent_name}."
        if result.created
        else f"{agent_name} already keeps this as {result.note.pk}."
    )
    if not request.htmx:
        return done(request, next_url(request, access), message)
    lifted = selectors.DayLine(line.note, line.index, line.line, line.text, result.note.pk)
    context = {**project_context(access, fresh=True), "item": lifted, "oob_counts": True}
    response = render(request, "dashboard/review.html#day_line_response", context)
    return toast(response, "success", message)
