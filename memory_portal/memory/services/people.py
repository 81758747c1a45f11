"""The people of the server (administrators): switch a person off or on — a person switched
off signs in no more and their API tokens stop at once (tokens.py checks `is_active` on every
call) — and make or unmake an administrator. Never oneself: the administrator acting stays
one, so the server always keeps an active administrator."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import transaction

from ..access import require_administrator
from ..actors import Actor
from ..audit_actions import AuditAction
from ..errors import MemoryPortalError
from ._common import audit


def person_change(
    *, actor: Actor, user, active: bool | None = None, administrator: bool | None = None
):
    """Set what is given of `active` and `administrator`; audited `person.change` with what
    changed. Refused: changing oneself (`memory_forbidden`)."""
    require_administrator(actor, "change people")
    people = get_user_model().objects
    with transaction.atomic():
        # The administrators' rows locked, in one order, and the actor still among them: two
        # administrators unmaking each other at once cannot both succeed and leave none.
        admins = people.select_for_update().filter(is_superuser=True, is_active=True)
        if actor.user.pk not in list(admins.order_by("pk").values_list("pk", flat=True)):
            raise MemoryPortalError(
                "memory_forbidden",
                "You are no longer an administrator.",
                hint="Ask an administrator.",
            )
        person = people.select_for_update().get(pk=user.pk)
        wanted = {"is_active": active, "is_superuser": administrator}
        changes = {k: v for k, v in wanted.items() if v is not None and getattr(person, k) != v}
        if not changes:
            return person
        if person.pk == actor.user.pk:
            raise MemoryPortalError(
                "memory_forbidden",
                "You cannot switch yourself off or stop being an administrator here.",
                hint="Ask another administrator.",
            )
        for name, value in changes.items():
            setattr(person, name, value)
        if "is_superuser" in changes:
            person.is_staff = person.is_superuser  # Django's admin flag follows, unused here
        person.save(update_fields=[*changes, "is_staff"])
        details = {
            {"is_active": "active", "is_superuser": "administrator"}[k]: v
            for k, v in changes.items()
        }
        audit(
            actor=actor,
            action=AuditAction.PERSON_CHANGE,
            project=None,
            target=person.get_username(),
            details=details,
        )
    return person
