"""The server's people (administrators): who can sign in, who administers. One service per
change (services.person_change); a refusal is a message on the page."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from memory_portal.memory import selectors, services
from memory_portal.memory.errors import MemoryPortalError

from .base import actor_of, done, not_found_edge, person_view, refusal

# A person's verbs on the People page: what each sets, and what the person is told.
PERSON_VERBS = {
    "deactivate": ({"active": False}, "{name} is switched off: no sign-in, no API token."),
    "activate": ({"active": True}, "{name} can sign in again."),
    "make-admin": ({"administrator": True}, "{name} is an administrator."),
    "unmake-admin": ({"administrator": False}, "{name} is no longer an administrator."),
}


@require_GET
@person_view
def people(request):
    rows = selectors.people_overview(actor=actor_of(request))
    return render(request, "dashboard/people.html", {"people": rows})


@require_POST
@person_view
def person_change(request, username, verb):
    if verb not in PERSON_VERBS:
        raise Http404("No such change.")
    page = reverse("dashboard:people")
    changes, message = PERSON_VERBS[verb]
    try:
        user = selectors.person_get(actor=actor_of(request), username=username)
        services.person_change(actor=actor_of(request), user=user, **changes)
    except MemoryPortalError as err:
        not_found_edge(err)  # no such person: a 404, as for any unknown id
        return refusal(request, err, to=page)
    return done(request, page, message.format(name=username))
