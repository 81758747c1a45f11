"""Django settings for Memory Portal, read once from the environment.

Every knob is an environment variable with a safe development default; README.md lists them.
Production runs with DEBUG off, a real SECRET_KEY and MEMORY_PORTAL_HTTPS=1 (see README.md).
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("MEMORY_PORTAL_VAR_DIR", BASE_DIR / "var"))


def _env(name: str, default, parse, expected: str):
    """The variable read with `parse`, or `default` when unset or empty; a value `parse`
    refuses (ValueError) stops the start-up, naming the variable."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return parse(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be {expected}, not {raw!r}.") from exc


def _at_least(floor: int):
    def parse(raw: str) -> int:
        value = int(raw)
        if value < floor:
            raise ValueError(raw)
        return value

    return parse


def _parse_bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ValueError(raw)


def env_bool(name: str, default: bool) -> bool:
    return _env(name, default, _parse_bool, "true or false")


def env_int(name: str, default: int) -> int:
    return _env(name, default, int, "an integer")


def env_float(name: str, default: float) -> float:
    return _env(name, default, float, "a number")


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


DEBUG = env_bool("DEBUG", False)

# Unset, a development key is used; `manage.py check --deploy` flags it (it starts with
# "django-insecure-"), so a production deployment cannot miss it.
SECRET_KEY = os.environ.get("SECRET_KEY") or (
    "django-insecure-memory-portal-development-key-not-for-production-use"
)

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "django_tables2",
    "django_filters",
    "ninja",
    # The database task queue's table, made by `migrate` whichever backend is selected, so
    # switching MEMORY_PORTAL_TASKS needs no migration of its own.
    "django_tasks_db",
    "memory_portal.memory",
    "memory_portal.dashboard",
    "memory_portal.api",
]

MIDDLEWARE = [
    "memory_portal.logs.RequestLogMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "memory_portal.api.middleware.RequestSizeLimitMiddleware",
    "memory_portal.api.middleware.RejectNulMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "memory_portal.api.middleware.ApiErrorEnvelopeMiddleware",
]
if DEBUG:  # `make run` shows the product's own error pages (failures.DebugErrorPages)
    MIDDLEWARE.append("memory_portal.failures.DebugErrorPages")

ROOT_URLCONF = "memory_portal.urls"
WSGI_APPLICATION = "memory_portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.csp",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
    {
        # The notes table's row, drawn 50 to 100 times a page (dashboard/jinja.py).
        "BACKEND": "django.template.backends.jinja2.Jinja2",
        "DIRS": [BASE_DIR / "templates" / "jinja2"],
        "APP_DIRS": False,
        "OPTIONS": {"environment": "memory_portal.dashboard.jinja.environment"},
    },
]
# Form widgets are drawn by Django's Jinja2 copies of its widget templates: the same HTML at
# a fraction of the template engine's cost per widget (the notes filter form has 14).
FORM_RENDERER = "django.forms.renderers.Jinja2"

# --- Database -------------------------------------------------------------------------------
# DATABASE_URL selects PostgreSQL (postgres://user@host:5432/name); unset, an SQLite file under
# var/ is the embedded default. SQLite writes use IMMEDIATE transactions so the setting-row lock
# of the write protocol (a single writer at a time) holds there too.
DATABASE_URL = os.environ.get("DATABASE_URL", "").strip()
# How long a request waits for a project's lock (PostgreSQL lock_timeout, SQLite's busy
# timeout) before it answers 503 memory_busy: a short bound keeps one busy project from holding
# the server's threads, so other projects stay fast. (MEMORY_PORTAL_DB_LOCK_TIMEOUT_MS is the
# older name of the same setting.)
DB_LOCK_TIMEOUT_MS = env_int(
    "MEMORY_PORTAL_LOCK_WAIT_MS", env_int("MEMORY_PORTAL_DB_LOCK_TIMEOUT_MS", 2_000)
)
DB_STATEMENT_TIMEOUT_MS = env_int("MEMORY_PORTAL_DB_STATEMENT_TIMEOUT_MS", 30_000)
# The largest import (POST /api/admin/import): a project at the 2,000-note cap with its full
# history exports to about 5 MB. Every other request body keeps Django's 2.5 MB.
# /metrics answers only a scraper that sends this as its bearer token (memory_portal/metrics.py).
MEMORY_PORTAL_METRICS_TOKEN = os.environ.get("MEMORY_PORTAL_METRICS_TOKEN", "").strip()
MEMORY_PORTAL_IMPORT_MAX_BYTES = env_int("MEMORY_PORTAL_IMPORT_MAX_BYTES", 32 * 1024 * 1024)

if DATABASE_URL:
    _db = dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 60))
    if _db["ENGINE"] != "django.db.backends.postgresql":
        raise ImproperlyConfigured("DATABASE_URL must be a postgres:// URL (or unset for SQLite).")
    # Django's backend with a health check that costs no round trip (memory_portal/database).
    _db["ENGINE"] = "memory_portal.database"
    _db.setdefault("OPTIONS", {})
    # The session's bounds are set when a connection opens (memory_portal/database/); the
    # client's TCP keepalives here.
    from memory_portal.database import client_keepalives

    for _name, _value in client_keepalives().items():
        _db["OPTIONS"].setdefault(_name, _value)
    # The hot path's statements are prepared on their connection at their first use
    # (memory/fastsql.py, prepared_cursor); off behind a pooler in transaction mode that does
    # not keep prepared statements (docs/OPERATIONS.md, "Several hosts").
    if env_bool("MEMORY_PORTAL_DB_PREPARED", True):
        _db["OPTIONS"].setdefault("prepare_threshold", 0)
    # A database host that does not answer fails a connection in seconds, not minutes.
    _db["OPTIONS"].setdefault("connect_timeout", env_int("MEMORY_PORTAL_DB_CONNECT_TIMEOUT", 5))
    _db["CONN_HEALTH_CHECKS"] = True
    DATABASES = {"default": _db}
else:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("SQLITE_PATH", str(VAR_DIR / "memory_portal.sqlite3")),
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": DB_LOCK_TIMEOUT_MS / 1000,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "staticfiles"))
# Plain names served straight from the source tree (no collectstatic needed), or the hashed,
# compressed copies collectstatic writes to STATIC_ROOT (production).
PLAIN_STATIC = DEBUG or env_bool("MEMORY_PORTAL_PLAIN_STATIC", False)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if PLAIN_STATIC
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}
WHITENOISE_USE_FINDERS = PLAIN_STATIC

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard:projects"
LOGOUT_REDIRECT_URL = "login"

# --- Security ---------------------------------------------------------------------------------
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF, CSP.NONCE],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
    "form-action": [CSP.SELF],
    "base-uri": [CSP.NONE],
    "object-src": [CSP.NONE],
}
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"

# Behind TLS (the production case) every cookie is secure and HTTP redirects to HTTPS.
HTTPS = env_bool("MEMORY_PORTAL_HTTPS", False)
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
SECURE_SSL_REDIRECT = HTTPS and env_bool("SECURE_SSL_REDIRECT", True)
# The probes a container runtime or load balancer sends to the process itself, over plain
# HTTP, answer rather than redirect.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000 if HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = HTTPS
SECURE_HSTS_PRELOAD = HTTPS
# The dashboard's public address (`https://memory.example.com`), for the links that leave it:
# events, webhooks and emails. Empty: those links are paths.
MEMORY_PORTAL_BASE_URL = os.environ.get("MEMORY_PORTAL_BASE_URL", "").strip().rstrip("/")
BEHIND_PROXY = env_bool("MEMORY_PORTAL_BEHIND_PROXY", False)
if BEHIND_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# How many trusted proxies, one behind the other, append the address they saw to
# X-Forwarded-For (a load balancer in front of each host's proxy: 2). The client's address is
# that many entries from the right (memory_portal.logs.client_address).
PROXY_HOPS = env_int("MEMORY_PORTAL_PROXY_HOPS", 1)
if PROXY_HOPS < 1:
    raise ImproperlyConfigured(
        f"MEMORY_PORTAL_PROXY_HOPS must be 1 or more, not {PROXY_HOPS} (without a proxy, set "
        "MEMORY_PORTAL_BEHIND_PROXY=false)."
    )

# No shared cache: login throttling counts in its own table (dashboard.LoginThrottle), made by
# `migrate` like every other table, so Django's per-process default cache is all that is left.

# --- Email: the daily digest and alerts (memory/emails.py) -------------------------------------
# EMAIL_URL names the mail server as a URL, read by dj-email-url:
# `smtp://user:password@mail.example.com:587/?tls=True` (or `submission://…`, `smtps://…`).
# Unset: under DEBUG (`make run`) each email is printed to the console; otherwise no email is
# sent (`manage.py check --deploy` says so, memory_portal.I003) and the digest reaches only
# webhooks.
EMAIL_URL = os.environ.get("EMAIL_URL", "").strip()
if EMAIL_URL:
    import dj_email_url

    try:
        _email = dj_email_url.parse(EMAIL_URL)
    except (KeyError, ValueError) as exc:
        raise ImproperlyConfigured(
            "EMAIL_URL must be a mail server's URL "
            f"(smtp://user:password@host:587/?tls=True): {exc}"
        ) from exc
    _mail_options = {}
    if _email["EMAIL_BACKEND"].endswith(".smtp.EmailBackend"):
        _mail_options = {
            "host": _email["EMAIL_HOST"],
            "port": _email["EMAIL_PORT"],
            "username": _email["EMAIL_HOST_USER"] or "",
            "password": _email["EMAIL_HOST_PASSWORD"] or "",
            "use_tls": _email["EMAIL_USE_TLS"],
            "use_ssl": _email["EMAIL_USE_SSL"],
            "timeout": env_int("EMAIL_TIMEOUT", 10),
        }
    MAILERS = {"default": {"BACKEND": _email["EMAIL_BACKEND"], "OPTIONS": _mail_options}}
elif DEBUG:
    MAILERS = {"default": {"BACKEND": "django.core.mail.backends.console.EmailBackend"}}
EMAIL_ENABLED = bool(EMAIL_URL) or DEBUG
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "").strip() or (
    "Memory Portal <memory-portal@localhost>"
)

# --- Single sign-on: OpenID Connect (memory_portal/dashboard/sso.py) ---------------------------
# Off unless MEMORY_PORTAL_OIDC_ISSUER names the identity provider (its discovery document is
# read from ISSUER/.well-known/openid-configuration when someone first signs in). The login page
# then offers "Sign in with NAME"; a person is made on first sign-in and found by verified email
# after that. docs/OPERATIONS.md, "Single sign-on", has a worked example.
OIDC_ISSUER = os.environ.get("MEMORY_PORTAL_OIDC_ISSUER", "").strip().rstrip("/")
SSO_ENABLED = bool(OIDC_ISSUER)
OIDC_PROVIDER_NAME = os.environ.get("MEMORY_PORTAL_OIDC_NAME", "").strip() or "single sign-on"
# mozilla-django-oidc's own settings, read by its views and backend.
OIDC_RP_CLIENT_ID = os.environ.get("MEMORY_PORTAL_OIDC_CLIENT_ID", "").strip()
OIDC_RP_CLIENT_SECRET = os.environ.get("MEMORY_PORTAL_OIDC_CLIENT_SECRET", "").strip()
OIDC_RP_SCOPES = " ".join(env_list("MEMORY_PORTAL_OIDC_SCOPES", ["openid", "email", "profile"]))
OIDC_RP_SIGN_ALGO = "RS256"
OIDC_USE_PKCE = True
OIDC_TIMEOUT = env_int("MEMORY_PORTAL_OIDC_TIMEOUT", 10)
OIDC_AUTHENTICATION_CALLBACK_URL = "sso_callback"
# A claim listing the person's groups, and what each group makes them in which project:
# `MEMORY_PORTAL_OIDC_ROLES=platform-leads=payments:manager,platform=payments:member`. The
# projects it names follow the provider at every sign-in (role raised, lowered or removed).
OIDC_GROUPS_CLAIM = os.environ.get("MEMORY_PORTAL_OIDC_GROUPS_CLAIM", "").strip()


def _parse_roles(raw: str) -> tuple[tuple[str, str, str], ...]:
    rules = []
    for item in raw.split(","):
        group, sep, target = item.strip().rpartition("=")
        slug, colon, role = target.partition(":")
        if not (sep and group.strip() and colon and slug.strip()) or role not in {
            "member",
            "manager",
        }:
            raise ValueError(item)
        rules.append((group.strip(), slug.strip(), role))
    return tuple(rules)


OIDC_ROLES = _env(
    "MEMORY_PORTAL_OIDC_ROLES",
    (),
    _parse_roles,
    "comma-separated GROUP=PROJECT:ROLE rules, ROLE member or manager",
)
# Password login and reset switched off: everyone signs in through the provider.
OIDC_ONLY = env_bool("MEMORY_PORTAL_OIDC_ONLY", False)
if SSO_ENABLED and not (OIDC_RP_CLIENT_ID and OIDC_RP_CLIENT_SECRET):
    raise ImproperlyConfigured(
        "MEMORY_PORTAL_OIDC_ISSUER is set: set MEMORY_PORTAL_OIDC_CLIENT_ID and "
        "MEMORY_PORTAL_OIDC_CLIENT_SECRET too (the provider gives both when the server is "
        "registered as a client)."
    )
if OIDC_ONLY and not SSO_ENABLED:
    raise ImproperlyConfigured(
        "MEMORY_PORTAL_OIDC_ONLY=true needs MEMORY_PORTAL_OIDC_ISSUER: nobody could sign in."
    )
if OIDC_ROLES and not OIDC_GROUPS_CLAIM:
    raise ImproperlyConfigured(
        "MEMORY_PORTAL_OIDC_ROLES needs MEMORY_PORTAL_OIDC_GROUPS_CLAIM (the claim, e.g. groups)."
    )
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "memory_portal.dashboard.sso.SignInBackend",
]

# --- Tasks ------------------------------------------------------------------------------------
# Where background tasks (the daily review) run. `immediate` (the default: `make run` needs
# nothing else) runs each in the process that enqueues it — the cron command, or the request of
# a person's "Run now". `database` queues them in the database (django-tasks-db) for
# `manage.py db_worker` processes, so no review runs in a web request or in cron.
TASKS_MODE = os.environ.get("MEMORY_PORTAL_TASKS", "").strip().lower() or "immediate"
_TASK_BACKENDS = {
    "immediate": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"},
    "database": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]},
}
if TASKS_MODE not in _TASK_BACKENDS:
    raise ImproperlyConfigured(
        f"MEMORY_PORTAL_TASKS must be immediate or database, not {TASKS_MODE!r}."
    )
TASKS = {"default": _TASK_BACKENDS[TASKS_MODE]}

# --- Logging: note bodies, queries and tokens never reach a log line --------------------------
# LOG_FORMAT=json: one JSON object a line (memory_portal/logs.py); text otherwise. Either way
# every line passes the redactor and carries the request id; one line per request
# (memory_portal.request) replaces runserver's own.
LOG_FORMAT = os.environ.get("LOG_FORMAT", "text").strip().lower() or "text"
if LOG_FORMAT not in {"text", "json"}:
    raise ImproperlyConfigured(f"LOG_FORMAT must be text or json, not {LOG_FORMAT!r}.")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "redact_secrets": {"()": "memory_portal.memory.secrets.RedactingFilter"},
        "request_id": {"()": "memory_portal.logs.RequestIdFilter"},
    },
    "formatters": {
        "text": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"},
        "json": {"()": "memory_portal.logs.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "filters": ["redact_secrets", "request_id"],
            "formatter": LOG_FORMAT,
        },
    },
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        # The MCP SDK logs messages (request bodies, so note text) at INFO and DEBUG.
        "mcp": {"level": "WARNING"},
        # httpx logs each request's URL at INFO: a webhook's (a chat hook's token is in its
        # query string) must never reach the logs.
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
        # runserver's request lines (their paths carry query strings): memory_portal.request.
        "django.server": {"level": "WARNING"},
        # Django's own handlers for it (a plain console line under DEBUG, mail to ADMINS) are
        # dropped: its lines go through the root's handler, in LOG_FORMAT, like every other.
        "django": {"handlers": [], "level": "INFO", "propagate": True},
    },
}

# --- Memory Portal domain settings --------------------------------------------------------------
# A form sent after the session ended: the product's own page (sign in again, come back).
CSRF_FAILURE_VIEW = "memory_portal.failures.csrf_failure"

MEMORY_PORTAL = {
    "ELIGIBLE_STAGES": env_list(
        "MEMORY_ELIGIBLE_STAGES", ["assess", "understand", "design", "review", "runtime"]
    ),
    "PROJECT_NOTE_CAP": env_int("MEMORY_PROJECT_NOTE_CAP", 2000),
    "RUN_NOTE_QUOTA": env_int("MEMORY_RUN_NOTE_QUOTA", 128),
    "RUN_CALL_BUDGET": env_int("MEMORY_RUN_CALL_BUDGET", 512),
    # An import's check: the most lines a file may have, and the seconds its check may take
    # (memory/portability/checks.py); either past, a 400 import_limit.
    "IMPORT_MAX_LINES": env_int("MEMORY_PORTAL_IMPORT_MAX_LINES", 50_000),
    # Webhook receivers on loopback, private or link-local networks (memory/webhooks.py).
    "WEBHOOK_ALLOW_PRIVATE": env_bool("MEMORY_PORTAL_WEBHOOK_ALLOW_PRIVATE", False),
    "IMPORT_CHECK_SECONDS": env_float("MEMORY_PORTAL_IMPORT_CHECK_SECONDS", 20),
    # Calls of one top-level run in flight at once, and how long the next waits for one to
    # end before 429 memory_run_busy (memory/run_slots.py; 0 lifts the limit).
    "RUN_IN_FLIGHT": env_int("MEMORY_RUN_IN_FLIGHT", 8),
    "RUN_IN_FLIGHT_WAIT_MS": env_int("MEMORY_RUN_IN_FLIGHT_WAIT_MS", 1_000),
    # No agent-facing call runs longer, its slot's wait included: then 503 memory_timeout,
    # nothing written (memory/deadline.py; 0 lifts the bound).
    "CALL_TIMEOUT_MS": env_int("MEMORY_CALL_TIMEOUT_MS", 10_000),
    "FACT_DEFAULT_EXPIRY_DAYS": env_int("MEMORY_FACT_DEFAULT_EXPIRY_DAYS", 90),
    "RECALL_THRESHOLD": env_float("MEMORY_RECALL_THRESHOLD", 0.5),
    # The second tier (docs/RECALL.md, "Two tiers"): up to this many further facts by meaning,
    # "possibly related", when the question is near the agent's memory; 0: the first tier alone.
    "RECALL_RELATED": env_int("MEMORY_RECALL_RELATED", 3),
    "RECALL_TIME_BUDGET_SECONDS": env_float("MEMORY_RECALL_TIME_BUDGET_SECONDS", 2.0),
    # Recall's semantic half (docs/RECALL.md, "Meaning"), on by default: the built-in model
    # (shipped in a package, nothing downloaded) unless an OpenAI-compatible endpoint is
    # configured; MEMORY_EMBEDDINGS=false scores words alone and stores no vectors.
    "EMBEDDINGS_ENABLED": env_bool("MEMORY_EMBEDDINGS", True),
    "EMBEDDINGS_URL": os.environ.get("MEMORY_EMBEDDINGS_URL", ""),
    "EMBEDDINGS_MODEL": os.environ.get("MEMORY_EMBEDDINGS_MODEL", ""),
    "EMBEDDINGS_API_KEY": os.environ.get("MEMORY_EMBEDDINGS_API_KEY", ""),
    "EMBEDDINGS_TIMEOUT_SECONDS": env_float("MEMORY_EMBEDDINGS_TIMEOUT_SECONDS", 5.0),
    "GIT_BINARY": os.environ.get("MEMORY_GIT_BINARY", "git"),
    "GIT_TIMEOUT_SECONDS": env_int("MEMORY_GIT_TIMEOUT_SECONDS", 10),
    # The daily digest (memory/services/notifications.py) is sent by the routine runner's
    # first pass at or after this hour (UTC), once a day per person.
    "DIGEST_HOUR": env_int("MEMORY_PORTAL_DIGEST_HOUR", 7),
    # An MCP session opened with an agent key is one run, finished after this long without a
    # call when its client never ends it.
    "MCP_IDLE_MINUTES": env_int("MEMORY_PORTAL_MCP_IDLE_MINUTES", 30),
    # Read records (memory/services/reads.py) older than this are pruned by the routine runner;
    # at least 30 days, the window of the daily review's "not read in 30 days".
    "READ_RETENTION_DAYS": _env(
        "MEMORY_PORTAL_READ_RETENTION_DAYS", 90, _at_least(30), "a whole number of days, 30 or more"
    ),
}
