"""The people of the server: a manager invites someone new into a project by email; an
administrator switches a person off or on — a person switched
off signs in no more and their API tokens stop at once (tokens.py checks `is_active` on every
call) — and make or unmake an administrator. Never oneself: the administrator acting stays
one, so the server always keeps an active administrator."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.core.mail import EmailMessage
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import Q
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from ..access import require_administrator, require_manager
from ..actors import Actor
from ..audit_actions import AuditAction
from ..errors import MemoryPortalError, invalid
from ..models import Role
from ._common import audit
from .projects import membership_set

USERNAME_MAX = 150  # Django's username field: the invited address is the username


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


def person_invite(*, actor: Actor, project, email: str, role: str, link_base: str):
    """Invite someone without an account into `project` (its managers): an account named by
    the address, with no password yet, its membership, and an email with a link to set the
    password — Django's own password-reset token (signed, single use: it stops working once
    the password is set; expiring after PASSWORD_RESET_TIMEOUT). The email is sent before the
    transaction ends, so a mail server that refuses it leaves nothing behind. `link_base`:
    the server's address, for the link."""
    require_manager(actor, project)
    if not settings.EMAIL_ENABLED:
        raise invalid(
            "email",
            "This server sends no email (EMAIL_URL is not set), so it cannot invite.",
            hint="Ask an administrator to set EMAIL_URL, or to create the account.",
        )
    address = (email or "").strip()
    try:
        validate_email(address)
    except ValidationError:
        raise invalid("email", f"{address!r} is not an email address.") from None
    if len(address) > USERNAME_MAX:
        raise invalid("email", f"An address of at most {USERNAME_MAX} characters.")
    if role not in Role.values:
        raise invalid("role", "role must be member or manager.")
    people = get_user_model().objects
    if people.filter(Q(email__iexact=address) | Q(username__iexact=address)).exists():
        raise invalid(
            "email",
            f"{address} already has an account here.",
            hint="Add them by username or email under “Add a person”.",
        )
    with transaction.atomic():
        user = people.model(username=address.lower(), email=address)
        user.set_unusable_password()
        user.save()
        membership_set(actor=actor, project=project, user=user, role=role)
        audit(actor=actor, action=AuditAction.PERSON_INVITE, project=project, target=user.username)
        uid = urlsafe_base64_encode(force_bytes(user.pk))
        token = default_token_generator.make_token(user)
        url = link_base.rstrip("/") + reverse("password_reset_confirm", args=[uid, token])
        context = {"project": project, "role": role, "url": url, "by": actor.user}
        EmailMessage(
            subject=f"You are invited to {project.name} on Memory Portal",
            body=render_to_string("email/invitation.txt", context),
            to=[address],
            headers={"Auto-Submitted": "auto-generated"},
        ).send()
    return user
