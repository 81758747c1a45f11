"""The people of the server: a manager invites someone new into a project by email; an
administrator switches a person off or on — a person switched
off signs in no more and their API tokens stop at once (tokens.py checks `is_active` on every
call) — and make or unmake an administrator. Never oneself: the administrator acting stays
one, so the server always keeps an active administrator."""

from __future__ import annotations

import logging

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
from .projects import membership_remove, membership_set

log = logging.getLogger(__name__)

USERNAME_MAX = 150  # Django's username field: the invited address is the username


def _answers_to(address: str) -> Q:
    """The accounts an address names: its email, or its username (an invited or signed-on
    person's account is named by the address), in any case."""
    return Q(email__iexact=address) | Q(username__iexact=address)


def _new_account(address: str, **names):
    """An account named by the address, with no password yet (set through an emailed link,
    or never: single sign-on)."""
    user = get_user_model()(username=address.lower(), email=address, **names)
    user.set_unusable_password()
    user.save()
    return user


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
    the server's address, for the link. Under OIDC_ONLY the link is the login page: they sign
    in through the identity provider with this address."""
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
    if people.filter(_answers_to(address)).exists():
        raise invalid(
            "email",
            f"{address} already has an account here.",
            hint="Add them by username or email under “Add a person”.",
        )
    with transaction.atomic():
        user = _new_account(address)
        membership_set(actor=actor, project=project, user=user, role=role)
        audit(actor=actor, action=AuditAction.PERSON_INVITE, project=project, target=user.username)
        if settings.OIDC_ONLY:  # no password here: they sign in through the provider
            url = link_base.rstrip("/") + reverse("login")
        else:
            uid = urlsafe_base64_encode(force_bytes(user.pk))
            token = default_token_generator.make_token(user)
            url = link_base.rstrip("/") + reverse("password_reset_confirm", args=[uid, token])
        context = {
            "project": project,
            "role": role,
            "url": url,
            "by": actor.user,
            "sso": settings.OIDC_PROVIDER_NAME if settings.OIDC_ONLY else "",
        }
        EmailMessage(
            subject=f"You are invited to {project.name} on Memory Portal",
            body=render_to_string("email/invitation.txt", context),
            to=[address],
            headers={"Auto-Submitted": "auto-generated"},
        ).send()
    return user


def person_sign_in(*, email, email_verified: bool, name: str = "", groups: list[str]):
    """The person an identity provider vouches for (single sign-on): found by their verified
    email (or an account named by it, as an invitation makes), or made on first sign-in with
    no password; then, for each project the role rules (settings.OIDC_ROLES) name, their role
    set to the highest their groups give — added, raised, lowered, or removed when no group
    gives one (never the last manager: logged and kept). Audited as the system: `person.sso`
    when the account is made, `membership.set` / `membership.remove` for each change. Refused:
    no verified email, or an address two accounts share."""
    address = email.strip() if isinstance(email, str) else ""
    try:
        validate_email(address)
    except ValidationError:
        address = ""
    if not address or not email_verified or len(address) > USERNAME_MAX:
        raise MemoryPortalError(
            "memory_forbidden",
            "The identity provider did not vouch for an email address, so nobody can be "
            "matched.",
            hint="Ask the provider's administrator to release a verified email claim.",
        )
    people = get_user_model().objects
    with transaction.atomic():
        found = list(people.select_for_update().filter(_answers_to(address))[:2])
        if len(found) > 1:
            raise MemoryPortalError(
                "memory_forbidden",
                f"Two accounts here answer to {address}.",
                hint="Ask an administrator to give each account its own address.",
            )
        if found:
            user = found[0]
        else:
            first, _, last = (name or "").strip().partition(" ")
            user = _new_account(address, first_name=first[:150], last_name=last[:150])
            audit(
                actor=None,
                action=AuditAction.PERSON_SIGN_IN,
                project=None,
                target=user.username,
            )
        if user.is_active:
            _roles_follow_groups(user, set(groups))
    return user


def _roles_follow_groups(user, groups: set[str]) -> None:
    """The person's role in each project the rules name, as their groups give it."""
    from ..models import Membership, Project

    wanted: dict[str, str | None] = {}
    for group, slug, role in settings.OIDC_ROLES:
        best = wanted.get(slug)
        if group in groups and (best is None or role == Role.MANAGER):
            best = role
        wanted[slug] = best
    projects = {p.slug: p for p in Project.objects.filter(slug__in=wanted)}
    current = dict(
        Membership.objects.filter(user=user, project__slug__in=wanted).values_list(
            "project__slug", "role"
        )
    )
    for slug, role in wanted.items():
        project = projects.get(slug)
        if project is None or current.get(slug) == role:
            continue
        try:
            if role is None:
                membership_remove(actor=None, project=project, user=user)
            else:
                membership_set(actor=None, project=project, user=user, role=role)
        except MemoryPortalError as err:  # the last manager stays one
            log.warning("sso: %s keeps their role in %s: %s", user.username, slug, err.message)
