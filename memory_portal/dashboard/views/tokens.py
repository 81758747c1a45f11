"""“Your API tokens”: a person creates (a label, an optional expiry, read-only or not), lists
and revokes their own bearer tokens for the API and the `memory` CLI. The token is shown once,
in the answer to the POST that made it. `manage.py create_api_token` stays for scripts."""

from __future__ import annotations

from datetime import timedelta

from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from memory_portal.memory import selectors, services
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.models import ApiToken

from ..forms import TokenForm
from .base import actor_of, done, person_view, refusal

PAGE = "dashboard/tokens.html"


def _page(request, *, form, status=200, created=None):
    actor = actor_of(request)
    context = {"form": form, "tokens": selectors.person_tokens(actor=actor), "now": timezone.now()}
    if created is not None:
        context["created"], context["secret"] = created
    response = render(request, PAGE, context, status=status)
    if created is not None:
        response["Cache-Control"] = "no-store"
    return response


@require_http_methods(["GET", "POST"])
@person_view
def tokens(request):
    if request.method == "GET":
        return _page(request, form=TokenForm())
    form = TokenForm(request.POST)
    if not form.is_valid():
        return _page(request, form=form, status=400)
    days = form.cleaned_data["expires"]
    try:
        created = services.token_create(
            actor=actor_of(request),
            user=request.user,
            label=form.cleaned_data["label"],
            can_write=not form.cleaned_data["read_only"],
            expires_at=timezone.now() + timedelta(days=int(days)) if days else None,
        )
    except MemoryPortalError as err:
        form.add_error("label" if err.field == "label" else None, f"{err.message} {err.hint}")
        return _page(request, form=form, status=err.status)
    return _page(request, form=TokenForm(), status=201, created=created)


@require_POST
@person_view
def token_revoke(request, prefix):
    page = reverse("dashboard:tokens")
    token = ApiToken.objects.filter(prefix=prefix, user=request.user).first()
    if token is None:
        return refusal(request, "No such token of yours.", to=page)
    services.token_revoke(actor=actor_of(request), token=token)
    return done(request, page, f"Revoked the token “{token.label or token}”.")
