"""Single sign-on with OpenID Connect, on mozilla-django-oidc: its views keep the state, nonce
and PKCE verifier in the session (one use each) and its backend exchanges the code; this module
adds what the library leaves to its users.

- The provider's endpoints come from its discovery document (`issuer`/.well-known/…), read
  when someone first signs in and kept an hour, its `issuer` checked against the setting.
- The ID token is checked whole: signature by a key of the provider's JWKS (asymmetric
  algorithms only), issuer, audience (and `azp`), expiry, issue time and nonce; the library
  checks no audience or issuer and lets an expired token escape as an error.
- Whatever is refused — a replayed or foreign `state`, a bad token, an unverified email, a
  switched-off account, a provider that cannot be reached — is a page saying so, with a way
  back to the login page; nothing is changed.
- The person is found or made, and their roles follow the groups claim, by one service
  (`services.person_sign_in`).
"""

from __future__ import annotations

import logging
import threading
import time

import jwt
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from memory_portal.memory import services
from memory_portal.memory.errors import MemoryPortalError

log = logging.getLogger(__name__)

DISCOVERY_TTL = 3600.0  # seconds a provider's discovery document is kept
CLOCK_SKEW = 30  # seconds of leeway on the token's times
# Signatures by the provider's published keys only: never `none`, never a shared secret.
ALGORITHMS = {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"}


class SignInRefused(Exception):
    """A sign-in refused, with the sentence the person is shown (nothing secret in it). Not
    a SuspiciousOperation, which the library's backend swallows into a failure that says
    nothing."""

    def __init__(self, message: str, *, status: int = 400, retry_after: int | None = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.retry_after = retry_after


_discovery: dict[str, tuple[float, dict]] = {}
_discovery_lock = threading.Lock()


def provider() -> dict:
    """The provider's discovery document (kept DISCOVERY_TTL seconds). Unreachable or not
    what the setting names: SignInRefused, 503."""
    issuer = settings.OIDC_ISSUER
    with _discovery_lock:
        kept = _discovery.get(issuer)
        if kept and time.monotonic() - kept[0] < DISCOVERY_TTL:
            return kept[1]
    unavailable = SignInRefused(
        "The identity provider cannot be reached just now. Try again in a minute.",
        status=503,
        retry_after=60,
    )
    try:
        response = requests.get(
            f"{issuer}/.well-known/openid-configuration", timeout=settings.OIDC_TIMEOUT
        )
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as exc:
        log.warning("sso: discovery at %s failed: %s", issuer, exc)
        raise unavailable from exc
    needed = ("authorization_endpoint", "token_endpoint", "jwks_uri", "userinfo_endpoint")
    if not isinstance(document, dict) or any(not document.get(k) for k in needed):
        log.warning("sso: discovery at %s lacks one of %s", issuer, ", ".join(needed))
        raise unavailable
    if str(document.get("issuer", "")).rstrip("/") != issuer:
        log.warning("sso: discovery names issuer %r, not %r", document.get("issuer"), issuer)
        raise unavailable
    with _discovery_lock:
        _discovery[issuer] = (time.monotonic(), document)
    return document


def forget_provider() -> None:
    """Drop the kept discovery documents (tests start providers of their own)."""
    with _discovery_lock:
        _discovery.clear()


class SignInBackend(OIDCAuthenticationBackend):
    """The code exchange of mozilla-django-oidc, with the endpoints of the discovery document,
    the whole ID token checked, and the person found or made by `services.person_sign_in`."""

    def __init__(self, *args, **kwargs):
        # The library reads the endpoints from settings here; they are read from the provider
        # in `authenticate`, so that a session's per-request `get_user` never calls it.
        self.UserModel = get_user_model()

    def authenticate(self, request, **kwargs):
        if not settings.SSO_ENABLED or request is None:
            return None
        if not (request.GET.get("code") and request.GET.get("state")):
            return None
        document = provider()
        self.OIDC_OP_TOKEN_ENDPOINT = document["token_endpoint"]
        self.OIDC_OP_USER_ENDPOINT = document["userinfo_endpoint"]
        self.OIDC_OP_JWKS_ENDPOINT = document["jwks_uri"]
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
        self.OIDC_RP_SIGN_ALGO = settings.OIDC_RP_SIGN_ALGO
        self.OIDC_RP_IDP_SIGN_KEY = None
        methods = document.get("token_endpoint_auth_methods_supported") or []
        self.basic_auth = "client_secret_post" not in methods and "client_secret_basic" in methods
        try:
            return super().authenticate(request, **kwargs)
        except requests.RequestException as exc:
            log.warning("sso: the provider refused or failed the code exchange: %s", exc)
            raise SignInRefused(
                "The identity provider did not accept this sign-in (it may have been used "
                "already). Start again from the login page."
            ) from exc

    def get_settings(self, attr, *args):
        if attr == "OIDC_TOKEN_USE_BASIC_AUTH":
            return self.basic_auth
        return super().get_settings(attr, *args)

    def verify_token(self, token, **kwargs):
        """The ID token, checked whole (the library checks its signature and nonce only)."""
        if not isinstance(token, str) or not token:
            raise SignInRefused("The identity provider sent no ID token.")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise SignInRefused("The identity provider's ID token is not a signed token.") from exc
        algorithm = header.get("alg")
        if algorithm not in ALGORITHMS:
            raise SignInRefused(
                f"The ID token is signed with {algorithm!r}, which is not accepted."
            )
        key = self._signing_key(header)
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=settings.OIDC_ISSUER,
                leeway=CLOCK_SKEW,
                options={"require": ["iss", "sub", "aud", "exp", "iat"]},
            )
        except jwt.ExpiredSignatureError as exc:
            raise SignInRefused("The identity provider's ID token has expired.") from exc
        except jwt.InvalidAudienceError as exc:
            raise SignInRefused("The ID token was issued for another application.") from exc
        except jwt.InvalidIssuerError as exc:
            raise SignInRefused("The ID token was issued by another provider.") from exc
        except jwt.InvalidSignatureError as exc:
            raise SignInRefused("The ID token's signature is not the provider's.") from exc
        except jwt.PyJWTError as exc:
            raise SignInRefused(f"The ID token is not valid: {exc}.") from exc
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != self.OIDC_RP_CLIENT_ID:
            raise SignInRefused("The ID token was issued for another application.")
        if claims.get("nonce") != kwargs.get("nonce"):
            raise SignInRefused("The ID token does not answer this sign-in (its nonce differs).")
        return claims

    def _signing_key(self, header: dict):
        try:
            response = requests.get(self.OIDC_OP_JWKS_ENDPOINT, timeout=settings.OIDC_TIMEOUT)
            response.raise_for_status()
            keys = jwt.PyJWKSet.from_dict(response.json()).keys
        except (requests.RequestException, ValueError, jwt.PyJWTError) as exc:
            log.warning("sso: the provider's keys could not be read: %s", exc)
            raise SignInRefused(
                "The identity provider's keys cannot be read just now. Try again in a minute.",
                status=503,
                retry_after=60,
            ) from exc
        kid = header.get("kid")
        usable = [
            k
            for k in keys
            if (kid is None or k.key_id == kid)
            and k.public_key_use in (None, "sig")
            and k.algorithm_name in (None, header.get("alg"))
        ]
        if len(usable) != 1:
            raise SignInRefused("The ID token's signature is not the provider's.")
        return usable[0]

    def get_userinfo(self, access_token, id_token, payload):
        """The userinfo endpoint's claims over the ID token's, when both name one subject."""
        claims = dict(payload)
        try:
            userinfo = super().get_userinfo(access_token, id_token, payload)
        except requests.RequestException as exc:
            log.warning("sso: userinfo failed: %s", exc)
            raise SignInRefused(
                "The identity provider did not say who signed in. Start again from the login page."
            ) from exc
        if not isinstance(userinfo, dict) or userinfo.get("sub") != payload.get("sub"):
            raise SignInRefused("The identity provider answered for someone else.")
        claims.update(userinfo)
        return claims

    def get_or_create_user(self, access_token, id_token, payload):
        claims = self.get_userinfo(access_token, id_token, payload)
        groups = claims.get(settings.OIDC_GROUPS_CLAIM) if settings.OIDC_GROUPS_CLAIM else None
        if isinstance(groups, str):
            groups = [groups]
        try:
            return services.person_sign_in(
                email=claims.get("email"),
                # A boolean, or the string some providers send (Amazon Cognito: "true").
                email_verified=claims.get("email_verified") in (True, "true"),
                name=claims.get("name") or "",
                groups=[g for g in groups or [] if isinstance(g, str)],
            )
        except MemoryPortalError as err:
            raise SignInRefused(err.message, status=403) from err


def _refused(request, message: str, *, status: int = 400, retry_after: int | None = None):
    response = render(
        request,
        "registration/sso_refused.html",
        {"message": message, "provider_name": settings.OIDC_PROVIDER_NAME},
        status=status,
    )
    if retry_after:
        response["Retry-After"] = str(retry_after)
    return response


class SignInStart(OIDCAuthenticationRequestView):
    """ "Sign in with …": to the provider, with a fresh state, nonce and PKCE challenge."""

    def __init__(self, **kwargs):
        super(OIDCAuthenticationRequestView, self).__init__(**kwargs)
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID

    def get(self, request):
        if not settings.SSO_ENABLED:
            return _refused(request, "Single sign-on is not set up on this server.", status=404)
        try:
            self.OIDC_OP_AUTH_ENDPOINT = provider()["authorization_endpoint"]
        except SignInRefused as err:
            return _refused(request, err.message, status=err.status, retry_after=err.retry_after)
        return super().get(request)


class SignInCallback(OIDCAuthenticationCallbackView):
    """The provider's answer: every refusal a page of its own, nothing changed."""

    def get(self, request):
        if not settings.SSO_ENABLED:
            return _refused(request, "Single sign-on is not set up on this server.", status=404)
        try:
            return super().get(request)
        except SignInRefused as err:
            log.warning("sso: sign-in refused: %s", err.message)
            return _refused(request, err.message, status=err.status, retry_after=err.retry_after)
        except SuspiciousOperation as exc:  # the library's: a state this session did not send
            log.warning("sso: sign-in refused: %s", exc)
            return _refused(request, STALE)

    def login_failure(self):
        request = self.request
        if request.GET.get("error"):
            said = request.GET.get("error_description") or request.GET.get("error")
            return _refused(request, f"The identity provider refused the sign-in: {said[:200]}")
        user = getattr(self, "user", None)
        if user is not None and not user.is_active:
            return _refused(
                request, "This account is switched off. Ask an administrator.", status=403
            )
        return _refused(request, STALE)


STALE = (
    "This sign-in was already used, or was not started in this browser. Start again from the "
    "login page."
)

sign_in_start = never_cache(SignInStart.as_view())
sign_in_callback = never_cache(SignInCallback.as_view())
