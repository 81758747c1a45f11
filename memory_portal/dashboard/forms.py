"""Dashboard forms: the throttled login and the small inputs of row and page actions. They
check only that the input is there; the services judge it."""

from __future__ import annotations

from django import forms
from django.contrib.auth.forms import AuthenticationForm

from memory_portal.logs import client_address
from memory_portal.memory import services
from memory_portal.memory.ids import is_public_id
from memory_portal.memory.models import RunStatus, Stage, stage_is_eligible
from memory_portal.memory.validation import SLUG_CHARS, SLUG_MAX

from . import throttling

# The bulk form's verbs and their labels (services.BULK_VERBS).
BULK_ACTIONS = {verb: verb.capitalize() for verb in services.BULK_VERBS}
# Not offered in the bulk bar: what a bulk forget's toast undoes with (restore by note id).
BULK_UNDO_ONLY = {"restore": "Restore"}


class ThrottledAuthenticationForm(AuthenticationForm):
    error_messages = {
        **AuthenticationForm.error_messages,
        "throttled": (
            "Too many failed log-in attempts. Wait %(minutes)d minutes and try again, "
            "or ask an administrator to reset your password."
        ),
    }

    throttled = False

    def clean(self):
        username = self.cleaned_data.get("username")
        if username is None or not self.cleaned_data.get("password"):
            return super().clean()  # a field is missing or invalid: no password is checked
        address = client_address(self.request)
        # The attempt is counted before the password is checked, so concurrent attempts
        # cannot all pass a check made before any of them failed.
        if not throttling.attempt_begin(username, address):
            self.throttled = True
            raise forms.ValidationError(
                self.error_messages["throttled"],
                code="throttled",
                params={"minutes": throttling.WINDOW_SECONDS // 60},
            )
        cleaned = super().clean()  # a wrong password raises: the attempt stays counted
        throttling.attempt_succeeded(username, address)
        return cleaned


class ResetForm(forms.Form):
    """Reset is irreversible: the person types the project slug to confirm."""

    confirm_slug = forms.CharField(label="Type the project id to confirm", strip=True)

    def __init__(self, *args, project, **kwargs):
        super().__init__(*args, **kwargs)
        self.project = project

    def clean_confirm_slug(self):
        value = self.cleaned_data["confirm_slug"]
        if value != self.project.slug:
            raise forms.ValidationError(
                f"Type {self.project.slug} exactly to confirm the reset.", code="mismatch"
            )
        return value


class TypedDeleteForm(forms.Form):
    """Deleting a project or an application: the person types its id; the service compares it
    (the same rule for the API and the command)."""

    confirm = forms.CharField(
        label="Type the id to confirm",
        strip=True,
        max_length=64,
        error_messages={"required": "Type the id to confirm the delete; nothing was deleted."},
    )


class ArchiveForm(forms.Form):
    reason = forms.CharField(strip=True)


class ReasonForm(forms.Form):
    """A reject's or a veto's reason: optional (a row's one-click button sends none); the
    service gates it (one line, no secret, REVIEW_REASON_MAX)."""

    reason = forms.CharField(strip=True, required=False)


class EditForm(forms.Form):
    content = forms.CharField(strip=True, widget=forms.Textarea)


class FactForm(forms.Form):
    text = forms.CharField(
        label="Fact",
        strip=True,
        widget=forms.Textarea(attrs={"rows": 3, "maxlength": 500}),
        help_text="One fact this agent keeps for its later runs (at most 500 characters). "
        "It expires in 90 days unless a review renews it.",
    )


class DeleteRunForm(forms.Form):
    confirm = forms.BooleanField(
        label="I understand: the run's scratchpad is deleted; its notes stay.", required=True
    )


class RunStatusForm(forms.Form):
    """A run's end as a manager reports it: finishing a running run, or correcting a finished
    one's status."""

    status = forms.ChoiceField(
        choices=[(RunStatus.SUCCEEDED, "Succeeded"), (RunStatus.FAILED, "Failed")]
    )


class BulkForm(forms.Form):
    action = forms.ChoiceField(choices=[*BULK_ACTIONS.items(), *BULK_UNDO_ONLY.items()])
    ids = forms.MultipleChoiceField(choices=(), required=True)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Any well-formed id is accepted here; the services find (or refuse) each note.
        self.fields["ids"].choices = [(i, i) for i in self.data.getlist("ids")]
        self.fields["ids"].error_messages["required"] = "Select at least one note."

    def clean_ids(self):
        """A malformed id (NUL, quotes, a page of text) is no note of any project: refuse the
        whole action, so nothing is half done on input no page of the dashboard sends."""
        ids = self.cleaned_data["ids"]
        malformed = [i for i in ids if not is_public_id(i, "mem")]
        if malformed:
            shown = malformed[0][:40].encode("unicode_escape").decode("ascii")
            raise forms.ValidationError(
                f"{shown!r} is not a note id; nothing was changed. Select notes on the page "
                "and try again.",
                code="malformed",
            )
        return ids


class LiftForm(forms.Form):
    note = forms.CharField()
    line = forms.IntegerField(min_value=0)


def reach(*, eligible: bool, reviewer: bool) -> str:
    """What an agent gets of memory, said beside its stage where it is less than every tool:
    a key for an agent of a stage not offered memory connects to nothing."""
    if not eligible:
        return "no memory tools"
    return "reads reviewed notes only" if reviewer else ""


def stage_choices(*, pick: bool = True) -> list[tuple[str, str]]:
    """The stages, each saying what its agents get (`reach`); for a new agent (`pick`) after
    "Pick a stage…": its stage is chosen, never taken by default."""
    choices = [("", "Pick a stage…")] if pick else []
    for value, label in Stage.choices:
        said = reach(eligible=stage_is_eligible(value), reviewer=value == Stage.REVIEW)
        choices.append((value, f"{label} — {said}" if said else label))
    return choices


def agent_choice(agent) -> tuple[str, str]:
    said = reach(eligible=agent.is_eligible, reviewer=agent.is_reviewer)
    return agent.pk, f"{agent.name} ({agent.stage}{' — ' + said if said else ''})"


class ConnectForm(forms.Form):
    """The Connect page: an agent of the project (or a new one, named with its stage) and the
    label of the key to create for it."""

    agent = forms.ChoiceField(label="Agent", choices=())
    name = forms.CharField(label="New agent's name", max_length=200, required=False, strip=True)
    stage = forms.ChoiceField(label="Its stage", choices=(), required=False)
    application = forms.ChoiceField(label="Its application", choices=(), required=False)
    label = forms.CharField(
        label="Where the key is used",
        max_length=100,
        strip=True,
        initial="MCP client",
        help_text="e.g. “Ana's Cursor” — it names the key in the agent's list of keys.",
    )

    NEW = "new"

    def __init__(self, *args, agents=(), applications=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["application"].choices = application_choices(applications)
        self.fields["stage"].choices = stage_choices()
        choices = [agent_choice(a) for a in agents]
        self.fields["agent"].choices = [*choices, (self.NEW, "A new agent…")]
        if not choices:
            self.initial.setdefault("agent", self.NEW)

    def clean(self):
        data = super().clean()
        if data.get("agent") == self.NEW:
            if not data.get("name"):
                self.add_error("name", "Name the new agent.")
            if not data.get("stage"):
                self.add_error("stage", "Pick the new agent's stage.")
        return data


def application_choices(applications) -> list[tuple[str, str]]:
    return [("", "The whole project"), *((a.slug, a.name) for a in applications)]


class AgentForm(forms.Form):
    name = forms.CharField(label="Name", max_length=200, strip=True)
    stage = forms.ChoiceField(label="Stage", choices=())
    application = forms.ChoiceField(label="Application", choices=(), required=False)

    def __init__(self, *args, applications=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["application"].choices = application_choices(applications)
        self.fields["stage"].choices = stage_choices()


class TokenForm(forms.Form):
    """A person's own API token: a label and how long it lasts."""

    EXPIRY_DAYS = [("", "Never"), ("7", "7 days"), ("30", "30 days"), ("90", "90 days"),
                   ("365", "A year")]  # fmt: skip

    label = forms.CharField(
        label="Label",
        max_length=100,
        strip=True,
        help_text="What the token is for, e.g. “release script”.",
    )
    expires = forms.ChoiceField(label="Expires after", choices=EXPIRY_DAYS, required=False)
    read_only = forms.BooleanField(label="Read-only (reads, no changes)", required=False)


class ImportForm(forms.Form):
    """An export file to check, then import (administrators): into the project it names, or
    into another (a copy with new ids)."""

    file = forms.FileField(
        label="Export file (.jsonl)",
        help_text="A file written by Download export, memory_export or the admin API.",
    )
    project = forms.RegexField(
        label="Into project (optional)",
        regex=rf"\A{SLUG_CHARS.pattern}\Z",
        required=False,
        strip=True,
        max_length=SLUG_MAX,
        error_messages={"invalid": f"A project id: letters, digits, - and _, at most {SLUG_MAX}."},
        help_text="Empty: the project the file names, its ids kept (a restore). Another id "
        "makes a copy with new ids; a project of that id is created if there is none.",
    )
    grant_members = forms.BooleanField(
        label="Give the file's members their roles in the new project",
        required=False,
        help_text="Only for a project the import creates; Check the file lists who and with "
        "what role. An existing project's members never change.",
    )
