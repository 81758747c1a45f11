"""The filters of note and audit lists (django-filter FilterSets, after NetBox's pattern): one
definition beside the selectors, read by the dashboard's notes table (and the agent and run
pages), its audit log, the review queue's sections, whose "See all" links are these filters'
own parameters — so a section and its link can never disagree — and the admin API's list of a
project's notes, which takes every NoteFilter parameter (its query schema is built from this
class, api/schemas/filters.py). The agents' tools and v1 lists keep their own few arguments
(kind, target, date, status), which are plain column matches."""

from __future__ import annotations

from datetime import datetime, time, timedelta

import django_filters
from django import forms
from django.db.models import Q
from django.utils import timezone

from ..audit_actions import AuditAction
from ..errors import MemoryPortalError
from ..ids import is_public_id
from ..models import (
    Agent,
    Application,
    AuditEvent,
    Kind,
    Note,
    Project,
    Run,
    RunStatus,
    Scope,
    Status,
    Target,
    Trust,
    expired_q,
    not_read_q,
    vetoed_q,
)
from .search import ranked_by_query

YES_NO = [("true", "Yes"), ("false", "No")]
PEOPLE = "people"  # `created_by=people`: the notes people wrote
DATE_INPUT = forms.DateInput(attrs={"type": "date"})


def _yes_no(value) -> bool | None:
    return {"true": True, "false": False}.get(value)


class _ListedChoices(django_filters.fields.ModelChoiceIterator):
    """A dropdown's rows read as a list, in one query. Django's iterator() on PostgreSQL opens a
    server-side cursor (DECLARE, FETCH, CLOSE) for the few applications of a project on every
    page that draws the filters."""

    def __iter__(self):
        if self.field.empty_label is not None:
            yield ("", self.field.empty_label)
        if self.field.null_label is not None:
            yield (self.field.null_value, self.field.null_label)
        for row in list(self.queryset):
            yield self.choice(row)


class _ListedChoiceField(django_filters.fields.ModelChoiceField):
    iterator = _ListedChoices


class _ListedChoiceFilter(django_filters.ModelChoiceFilter):
    field_class = _ListedChoiceField


def _day_start(day) -> datetime:
    return datetime.combine(day, time.min, tzinfo=timezone.get_current_timezone())


def from_day(queryset, field: str, day):
    """Rows whose `field` is on `day` or later, as a timestamp range the column's index
    serves (no cast of the column)."""
    return queryset.filter(**{f"{field}__gte": _day_start(day)}) if day else queryset


def to_day(queryset, field: str, day):
    """Rows whose `field` is on `day` or earlier (an index range, as `from_day`)."""
    if not day:
        return queryset
    return queryset.filter(**{f"{field}__lt": _day_start(day + timedelta(days=1))})


class ListFilter(django_filters.FilterSet):
    """What the lists' FilterSets share: the API's check and the dashboard's count."""

    def checked_qs(self):
        """The filtered rows, or `memory_invalid` naming the first filter whose value is
        refused (the API's lists; the dashboard shows the form's errors instead)."""
        if not self.is_valid():
            name, errors = next(iter(self.errors.items()))
            raise MemoryPortalError(
                "memory_invalid", f"{name}: {errors[0]}", field=name, hint="Fix the named filter."
            )
        return self.qs

    @property
    def active_count(self) -> int:
        if not self.is_bound:
            return 0
        return sum(1 for name in self.filters if self.data.get(name))


class NoteFilter(ListFilter):
    q = django_filters.CharFilter(
        label="Text",
        method="filter_text",
        widget=forms.TextInput(attrs={"type": "search", "autocomplete": "off"}),
    )
    trust = django_filters.ChoiceFilter(choices=Trust.choices, empty_label="Any trust")
    status = django_filters.ChoiceFilter(choices=Status.choices, empty_label="Any status")
    kind = django_filters.ChoiceFilter(choices=Kind.choices, empty_label="Any kind")
    target = django_filters.ChoiceFilter(choices=Target.choices, empty_label="Any target")
    scope = django_filters.ChoiceFilter(choices=Scope.choices, empty_label="Any scope")
    application = _ListedChoiceFilter(
        queryset=Application.objects.none(), to_field_name="slug", empty_label="Any application"
    )
    agent = django_filters.ChoiceFilter(
        label="Agent", choices=(), method="filter_agent", empty_label="Any agent"
    )
    created_by = django_filters.CharFilter(
        label="Written by", method="filter_created_by", widget=forms.HiddenInput
    )
    run = django_filters.CharFilter(label="Run", method="filter_run")
    tag = django_filters.CharFilter(label="Tag", method="filter_tag")
    created_from = django_filters.DateFilter(
        label="Created from", field_name="created_at", lookup_expr="date__gte", widget=DATE_INPUT
    )
    created_to = django_filters.DateFilter(
        label="Created to", field_name="created_at", lookup_expr="date__lte", widget=DATE_INPUT
    )
    day = django_filters.DateFilter(label="Day log of", field_name="day", widget=DATE_INPUT)
    expired = django_filters.ChoiceFilter(
        label="Expired", choices=YES_NO, method="filter_expired", empty_label="Expired or not"
    )
    evidence_stale = django_filters.ChoiceFilter(
        label="Evidence stale",
        choices=YES_NO,
        method="filter_evidence_stale",
        empty_label="Stale or not",
    )
    day_log = django_filters.ChoiceFilter(
        label="Day logs", choices=YES_NO, method="filter_day_log", empty_label="Day logs or not"
    )
    rejected = django_filters.ChoiceFilter(
        label="Rejected", choices=YES_NO, method="filter_rejected", empty_label="Rejected or not"
    )
    vetoed = django_filters.ChoiceFilter(
        label="Vetoed", choices=YES_NO, method="filter_vetoed", empty_label="Vetoed or not"
    )
    # The URL's name stays `not_recalled`; what it reads is the read records (any agent's run
    # served the note, by recall, search, read or list).
    not_recalled = django_filters.ChoiceFilter(
        label="Not read by any run in 30 days",
        choices=YES_NO,
        method="filter_not_recalled",
        empty_label="Read or not",
    )

    class Meta:
        model = Note
        fields: list[str] = []

    def __init__(
        self, data=None, queryset=None, *, project: Project | None, agents=None, **kwargs
    ):
        """`project`: the project whose applications and agents the filters name (None: an
        agent's read across what it sees, where those two filters accept no value). `agents`:
        the project's agents when the caller has them; else they are read only if the agent
        filter is given a value or its form field drawn."""
        super().__init__(data, queryset, **kwargs)
        self.project = project
        self.filters["application"].queryset = Application.objects.filter(
            project=project
        ).select_related("project")
        if agents is None:
            agents = Agent.objects.filter(project=project) if project else Agent.objects.none()
        # A callable: Django's ChoiceField reads it on first use, not here.
        self.filters["agent"].extra["choices"] = lambda: [(a.pk, a.name) for a in agents]

    def filter_queryset(self, queryset):
        """Every other filter first, then the text: the search ranks what the filters kept
        (ranking first would cut its list before a filter narrowed it)."""
        values = dict(self.form.cleaned_data)
        text = values.pop("q", "")
        for name, value in values.items():
            queryset = self.filters[name].filter(queryset, value)
        return self.filters["q"].filter(queryset, text)

    def filter_text(self, queryset, name, value):
        """Words and meaning, by the one ranker (search.ranked_by_query: the hybrid score
        recall uses; words alone with meaning off), best first; a note's id finds the note.
        A table sorted by a column keeps that sort."""
        value = value.strip()
        if not value:
            return queryset
        ids = [word for word in value.split() if is_public_id(word, "mem")]
        if ids:
            return queryset.filter(id__in=ids)
        return ranked_by_query(queryset, value, project=self.project)

    def filter_agent(self, queryset, name, value):
        if not value:
            return queryset
        return queryset.filter(Q(owner_agent_id=value) | Q(created_by_agent_id=value))

    def filter_created_by(self, queryset, name, value):
        """The notes an agent wrote (its `agt_` id), or `people` for those people wrote."""
        value = value.strip()
        if not value:
            return queryset
        return queryset.filter(created_by_agent_id="" if value == PEOPLE else value)

    def filter_vetoed(self, queryset, name, value):
        match _yes_no(value):
            case True:
                return queryset.filter(vetoed_q())
            case False:
                return queryset.exclude(vetoed_q())
        return queryset

    def filter_run(self, queryset, name, value):
        value = value.strip()
        if not value:
            return queryset
        return queryset.filter(Q(origin_run_ref=value) | Q(top_level_run_id=value))

    def filter_tag(self, queryset, name, value):
        return queryset.tagged(value)

    def filter_expired(self, queryset, name, value):
        expired = expired_q(timezone.now())
        match _yes_no(value):
            case True:
                return queryset.filter(expired)
            case False:
                return queryset.exclude(expired)
        return queryset

    def filter_day_log(self, queryset, name, value):
        match _yes_no(value):
            case True:
                return queryset.filter(kind=Kind.DAY)
            case False:
                return queryset.exclude(kind=Kind.DAY)
        return queryset

    def filter_rejected(self, queryset, name, value):
        match _yes_no(value):
            case True:
                return queryset.filter(trust=Trust.REJECTED)
            case False:
                return queryset.exclude(trust=Trust.REJECTED)
        return queryset

    def filter_not_recalled(self, queryset, name, value):
        not_recalled = not_read_q(timezone.now())
        match _yes_no(value):
            case True:
                return queryset.filter(not_recalled)
            case False:
                return queryset.exclude(not_recalled)
        return queryset

    def filter_evidence_stale(self, queryset, name, value):
        flag = _yes_no(value)
        # `evidence_stale` is annotated by selectors.notes_table.
        return queryset if flag is None else queryset.filter(evidence_stale=flag)


class RunFilter(ListFilter):
    """A project's runs (the dashboard's Runs tab and the admin API's list of runs): by agent,
    status, task key and the day it started. Every filter is a column of the run's table."""

    agent = django_filters.ChoiceFilter(
        label="Agent", choices=(), field_name="agent_id", empty_label="Any agent"
    )
    status = django_filters.ChoiceFilter(choices=RunStatus.choices, empty_label="Any status")
    task_key = django_filters.CharFilter(
        label="Task key", field_name="task_key", lookup_expr="iexact"
    )
    started_from = django_filters.DateFilter(
        label="Started from", method="filter_from", widget=DATE_INPUT
    )
    started_to = django_filters.DateFilter(
        label="Started to", method="filter_to", widget=DATE_INPUT
    )

    class Meta:
        model = Run
        fields: list[str] = []

    def __init__(self, data=None, queryset=None, *, project: Project, agents=None, **kwargs):
        """`agents`: the project's agents when the caller has them (the dropdown's choices);
        else read when the agent filter is given a value or its field drawn."""
        super().__init__(data, queryset, **kwargs)
        if agents is None:
            agents = Agent.objects.filter(project=project).order_by("name")
        self.filters["agent"].extra["choices"] = lambda: [(a.pk, a.name) for a in agents]

    def filter_from(self, queryset, name, value):
        return from_day(queryset, "started_at", value)

    def filter_to(self, queryset, name, value):
        return to_day(queryset, "started_at", value)


# The audit filter offers every action the services record as a suggestion.
KNOWN_ACTIONS = AuditAction.values


class AuditFilter(django_filters.FilterSet):
    """Every filter is an indexed condition: the project by its id, the actor by exact match
    (an agent or run id, else the actor's label), the dates as a timestamp range (no cast of
    the column), so a page costs the same at three million events as at three hundred."""

    # A slug, not a list of every project: an administrator's list of 500 projects cost more
    # to render than the page's events (the view checks the slug is the person's project).
    project = django_filters.CharFilter(
        label="Project",
        method="filter_project",
        widget=forms.TextInput(attrs={"placeholder": "every project (or a slug)"}),
    )
    actor = django_filters.CharFilter(label="Actor", method="filter_actor")
    action = django_filters.CharFilter(
        label="Action",
        field_name="action",
        lookup_expr="startswith",
        widget=forms.TextInput(
            attrs={"list": "audit-actions", "placeholder": AuditAction.NOTE_VETO.value}
        ),
    )
    date_from = django_filters.DateFilter(label="From", method="filter_from", widget=DATE_INPUT)
    date_to = django_filters.DateFilter(label="To", method="filter_to", widget=DATE_INPUT)

    class Meta:
        model = AuditEvent
        fields: list[str] = []

    def __init__(self, data=None, queryset=None, *, project=None, **kwargs):
        super().__init__(data, queryset, **kwargs)
        self.project = project  # the project of `?project=`, resolved by the view

    def filter_project(self, queryset, name, value):
        return queryset.filter(project_id=self.project.pk) if self.project else queryset

    def filter_actor(self, queryset, name, value):
        value = value.strip()
        if not value:
            return queryset
        if is_public_id(value, "agt"):
            return queryset.filter(actor_agent_id=value)
        if is_public_id(value, "run"):
            return queryset.filter(actor_run_id=value)
        return queryset.filter(actor_label=value)

    def filter_from(self, queryset, name, value):
        return from_day(queryset, "created_at", value)

    def filter_to(self, queryset, name, value):
        return to_day(queryset, "created_at", value)
