"""Secret detection: what is refused, what passes, and that logs never carry the secret."""

import logging
import re
import sys

import pytest

from memory_portal.memory.secrets import RULES, RedactingFilter, find_secret, redact, scan_fields

RULE_NAMES = {name for name, _ in RULES}

# Every value below is fake, generated at random for these tests. Vendor prefixes are split
# ("gh" + "p_…") so secret scanners on the repository do not mistake the corpus for a leak.


def pem(kind: str, body: str) -> str:
    label = f"{kind} PRIVATE KEY".strip()
    return "-----BEGIN " + label + "-----\n" + body + "\n-----END " + label + "-----\n"


JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiAiYWd0X2Zha2UiLCAiZXhwIjogMTk5OTk5OTk5OX0"
    ".w1zW9-ohP46PbmT1TOkzfR1wKbPXTXx8TTx4XUMGmTt"
)
AZURE_KEY = (
    "y27dFanUrOSE62chn4xdeJg1Kza5KxxGWfvmaQtKnP/VSGVBrYSuIb9OZiFZ3HLKv797TPNbpjava1bMZwIMlv=="
)
PEM_BODY = "MIIEpAIBAAKCAQEA3Tz2mr7SuFv9Kx1yq0m6hK4pLw8XnR2cVb5Jd7eQf1gHsYtU"

# (text, expected rule, a substring that must never survive redaction)
SECRETS = [
    pytest.param(pem("RSA", PEM_BODY), "private_key", PEM_BODY, id="pem-rsa"),
    pytest.param(pem("", PEM_BODY), "private_key", PEM_BODY, id="pem-pkcs8"),
    pytest.param(pem("EC", PEM_BODY), "private_key", PEM_BODY, id="pem-ec"),
    pytest.param(
        "id_ed25519:\n" + pem("OPENSSH", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"),
        "private_key",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
        id="pem-openssh",
    ),
    pytest.param(
        "-----BEGIN PGP " + "PRIVATE KEY BLOCK-----\n\nlQOYBGZfakeBCAC9xQ2mZ7rT\n=Xk2p\n"
        "-----END PGP PRIVATE KEY BLOCK-----",
        "private_key",
        "lQOYBGZfakeBCAC9xQ2mZ7rT",
        id="pgp-block",
    ),
    pytest.param(
        '{"private_key": "-----BEGIN ' + "PRIVATE KEY-----\\n" + PEM_BODY + "\\n-----END "
        'PRIVATE KEY-----\\n"}',
        "private_key",
        PEM_BODY,
        id="pem-json-escaped",
    ),
    pytest.param(
        "-----BEGIN ENCRYPTED " + "PRIVATE KEY-----\n" + PEM_BODY + "\n(truncated)",
        "private_key",
        PEM_BODY,
        id="pem-truncated",
    ),
    pytest.param(
        "DATABASE_URL=postgres://app:Zq8vLm2Rt7Kp@db.internal:5432/app",
        "url_credentials",
        "Zq8vLm2Rt7Kp",
        id="url-postgres",
    ),
    pytest.param(
        "clone https://deploy:T7vkP2q-w9Xz@git.example.com/org/repo.git",
        "url_credentials",
        "T7vkP2q-w9Xz",
        id="url-https",
    ),
    pytest.param(
        "redis://:n8Vq2LmP4x@cache:6379/0", "url_credentials", "n8Vq2LmP4x", id="url-redis"
    ),
    pytest.param(
        "mongodb+srv://svc:Pq7mN2vX9e@cluster0.example.net/notes?retryWrites=true",
        "url_credentials",
        "Pq7mN2vX9e",
        id="url-mongodb-srv",
    ),
    pytest.param(
        "broker: amqp://worker:rabbit-7Hk2@mq.example.com:5672/",
        "url_credentials",
        "rabbit-7Hk2",
        id="url-amqp",
    ),
    pytest.param(
        "backup user key id " + "AKIA" + "VQJXXVBOTHD0WTFL" + " (rotated monthly)",
        "aws_access_key",
        "VQJXXVBOTHD0WTFL",
        id="aws-akia",
    ),
    pytest.param(
        "AWS_ACCESS_KEY_ID=" + "ASIA" + "Q3M7ZK2XW9PLT4RB",
        "aws_access_key",
        "Q3M7ZK2XW9PLT4RB",
        id="aws-asia",
    ),
    pytest.param(
        "aws_secret_access_key = pdzPaEMM1ZA7V0FhHVJWDBt2hWdQZUm14QhoxhLP",
        "aws_secret_key",
        "pdzPaEMM1ZA7V0FhHVJWDBt2hWdQZUm14QhoxhLP",
        id="aws-secret",
    ),
    pytest.param(
        '{"type": "service_account", "project_id": "demo-1234", '
        '"private_key_id": "60a077bbd142880e8427abeec12975fd55911ea2"}',
        "gcp_service_account",
        "60a077bbd142880e8427abeec12975fd55911ea2",
        id="gcp-private-key-id",
    ),
    pytest.param(
        '{"type": "service_account", "project_id": "demo-1234", "private_key": "..."}',
        "gcp_service_account",
        '"type": "service_account"',
        id="gcp-service-account",
    ),
    pytest.param(
        "maps key " + "AI" + "zaWV1mKaUyvBPs0jSO2Jkf08MMF1ulMMCw3XV",
        "google_api_key",
        "WV1mKaUyvBPs0jSO2Jkf08MMF1ulMMCw3XV",
        id="google-api-key",
    ),
    pytest.param(
        "DefaultEndpointsProtocol=https;AccountName=demo;AccountKey="
        + AZURE_KEY
        + ";EndpointSuffix=core.windows.net",
        "azure_storage_key",
        AZURE_KEY,
        id="azure-account-key",
    ),
    pytest.param(
        "GH_TOKEN " + "gh" + "p_bSh2Cde2wioVMEuUYMjPeFXsRgZzCYTHY2Iv",
        "github_token",
        "bSh2Cde2wioVMEuUYMjPeFXsRgZzCYTHY2Iv",
        id="github-ghp",
    ),
    pytest.param(
        "oauth " + "gh" + "o_GYF0eYF2ExFJgKLDL36awmUDt8QvwTH6Iuj2",
        "github_token",
        "GYF0eYF2ExFJgKLDL36awmUDt8QvwTH6Iuj2",
        id="github-gho",
    ),
    pytest.param(
        "github" + "_pat_OkDCJ23VmCwykTp4EilsS2_aQnjUHc6LZQ9SMDcEVV8bOhUVXoqmaQzE4ftUvXQ",
        "github_token",
        "OkDCJ23VmCwykTp4EilsS2_aQnjUHc6LZQ9SMDcEVV8bOhUVXoqmaQzE4ftUvXQ",
        id="github-fine-grained-pat",
    ),
    pytest.param(
        "export GITLAB_TOKEN=" + "gl" + "pat-e57l9JuO4iIhOvqiZnCx",
        "gitlab_token",
        "e57l9JuO4iIhOvqiZnCx",
        id="gitlab-pat",
    ),
    pytest.param(
        "bot token " + "xo" + "xb-180783752346-3202687496510-dCL8Sby90WIJSbUGWBOWWcua",
        "slack_token",
        "dCL8Sby90WIJSbUGWBOWWcua",
        id="slack-bot",
    ),
    pytest.param(
        "xo" + "xp-2981734562-7712365498-9081726354-5c1e0f3a9b7d2e4f6a8c0b1d3e5f7a9c",
        "slack_token",
        "5c1e0f3a9b7d2e4f6a8c0b1d3e5f7a9c",
        id="slack-user",
    ),
    pytest.param(
        "alerts go to https://hooks.slack.com/services/"
        + "T0ZBB5A2ODU/BPCIVDM3RDZ/14cKuuBNf0gmUBUhWRQdIAUD",
        "slack_webhook",
        "14cKuuBNf0gmUBUhWRQdIAUD",
        id="slack-webhook",
    ),
    pytest.param(
        "STRIPE_KEY " + "sk" + "_live_FbxtBetshRQNG3dhi4wVnX55",
        "stripe_key",
        "FbxtBetshRQNG3dhi4wVnX55",
        id="stripe-sk-live",
    ),
    pytest.param(
        "rk" + "_live_8GkvxThvA0EhexWQ3czyrEvm",
        "stripe_key",
        "8GkvxThvA0EhexWQ3czyrEvm",
        id="stripe-rk-live",
    ),
    pytest.param(
        "test mode: " + "sk" + "_test_51Hx9QmFakeKey0aBcDeFgHiJ",
        "stripe_key",
        "51Hx9QmFakeKey0aBcDeFgHiJ",
        id="stripe-sk-test",
    ),
    pytest.param(
        "ANTHROPIC_API_KEY " + "sk-" + "ant-api03-wp-vaQcT7xl2cwC6dT0ctPVnaawqrczLJWImKMG4hEbuU",
        "anthropic_key",
        "wp-vaQcT7xl2cwC6dT0ctPVnaawqrczLJWImKMG4hEbuU",
        id="anthropic",
    ),
    pytest.param(
        "old key " + "sk-" + "kXbI8P0GwAESV5nkthBGJd8xncwjxTZVcUOpdxfWEIRH3KU3",
        "openai_key",
        "kXbI8P0GwAESV5nkthBGJd8xncwjxTZVcUOpdxfWEIRH3KU3",
        id="openai-legacy",
    ),
    pytest.param(
        "sk-" + "proj-oPK_HJN45P-ED75cNRqsKz5b70CO8W7RQHy2Yp_ptzsJqLOJqu3g9DYpQaxEN_cNljiRk",
        "openai_key",
        "oPK_HJN45P-ED75cNRqsKz5b70CO8W7RQHy2Yp_ptzsJqLOJqu3g9DYpQaxEN_cNljiRk",
        id="openai-project",
    ),
    pytest.param(
        "compatible endpoint, key sk-" + "14e287ba054769ba41cbb44f07539038",
        "openai_key",
        "14e287ba054769ba41cbb44f07539038",
        id="openai-style-hex",
    ),
    pytest.param(
        "//registry.npmjs.org/:_authToken=" + "np" + "m_LpaKoJceXBH42IkQFU960mNhJuAPXOEGvgUs",
        "npm_token",
        "LpaKoJceXBH42IkQFU960mNhJuAPXOEGvgUs",
        id="npm",
    ),
    pytest.param(
        "MEMORY_PORTAL_TOKEN=" + "mp" + "_10e6f58de9b9_3xzfMg5lJYj_loHI3Yhc1OxT-8QY4-3BMDogiSTRIiP",
        "memory_portal_token",
        "3xzfMg5lJYj_loHI3Yhc1OxT-8QY4-3BMDogiSTRIiP",
        id="memory-portal-token",
    ),
    pytest.param("session cookie " + JWT, "jwt", JWT.rsplit(".", 1)[1], id="jwt"),
    pytest.param(
        "Authorization: Bearer 9LJm7R04ZhbGSdGWoZ6axl7KBGgMVGOYn7B3.5SA",
        "bearer_header",
        "9LJm7R04ZhbGSdGWoZ6axl7KBGgMVGOYn7B3.5SA",
        id="bearer-header",
    ),
    pytest.param(
        'curl -H "Authorization: Basic ZGVwbG95Ok4wdC1hLXJlYWwtcHch" https://ci.example.com',
        "bearer_header",
        "ZGVwbG95Ok4wdC1hLXJlYWwtcHch",
        id="basic-header",
    ),
    pytest.param(
        "headers = {'Authorization': 'Token 4c7b2a9e0d1f3e5a'}",
        "bearer_header",
        "4c7b2a9e0d1f3e5a",
        id="token-header",
    ),
    pytest.param(
        "send it as Bearer Q2x9vR7mK4pL8nZ3wT6yB1cF5",
        "bearer_header",
        "Q2x9vR7mK4pL8nZ3wT6yB1cF5",
        id="bearer-bare",
    ),
    pytest.param("password=hunter22x", "credential_assignment", "hunter22x", id="assign-password"),
    pytest.param(
        "DB_PASSWORD=Tr0ub4dor&3", "credential_assignment", "Tr0ub4dor&3", id="assign-env-var"
    ),
    pytest.param(
        '{"api_key": "a8f3k2m9q7w1z5x4"}',
        "credential_assignment",
        "a8f3k2m9q7w1z5x4",
        id="assign-json",
    ),
    pytest.param(
        "client_secret: 'Xk29-vq7LmN3'", "credential_assignment", "Xk29-vq7LmN3", id="assign-yaml"
    ),
    pytest.param(
        "x-api-key: 7f3a9c2e1b", "credential_assignment", "7f3a9c2e1b", id="assign-header"
    ),
    pytest.param(
        'SECRET_KEY = "django-insecure-8k2mx9q0z7w"',
        "credential_assignment",
        "django-insecure-8k2mx9q0z7w",
        id="assign-django-secret-key",
    ),
    pytest.param(
        "./manage.py migrate --password=S3cure!Pass",
        "credential_assignment",
        "S3cure!Pass",
        id="assign-cli-flag",
    ),
    pytest.param(
        "DATABASES = {'default': {'USER': 'app', 'PASSWORD': 'letmein42'}}",
        "credential_assignment",
        "letmein42",
        id="assign-django-settings",
    ),
    pytest.param(
        "passwd = correcthorse", "credential_assignment", "correcthorse", id="assign-bare-word"
    ),
    pytest.param(
        '$password = "p@ssW0rd2024";', "credential_assignment", "p@ssW0rd2024", id="assign-php"
    ),
    pytest.param(
        "config.password => 'Zebra-Fish-42'",
        "credential_assignment",
        "Zebra-Fish-42",
        id="assign-ruby",
    ),
    pytest.param(
        '"password": "correct horse battery staple"',
        "credential_assignment",
        "correct horse battery staple",
        id="assign-passphrase",
    ),
    pytest.param(
        "GET https://api.example.com/v1/items?access_token=8c1d7e2f9a3b&page=2",
        "credential_assignment",
        "8c1d7e2f9a3b",
        id="assign-query-string",
    ),
    pytest.param("PIN code: pwd: 481516", "credential_assignment", "481516", id="assign-numeric"),
]

HARMLESS = [
    pytest.param("Rotate the staging password every quarter; the vault has it.", id="prose"),
    pytest.param("the password field is required", id="prose-field"),
    pytest.param("token: see the vault", id="prose-token-colon"),
    pytest.param("Password: required", id="prose-required"),
    pytest.param("password=None", id="none"),
    pytest.param("password: <redacted>", id="angle-placeholder"),
    pytest.param('password = os.environ["DB_PASSWORD"]', id="os-environ"),
    pytest.param("api_key=settings.API_KEY", id="settings-ref"),
    pytest.param("token = get_token()", id="call"),
    pytest.param("password: ${DB_PASSWORD}", id="shell-var"),
    pytest.param("password=****", id="mask-short"),
    pytest.param("password = '************'", id="mask-long"),
    pytest.param('"password": ""', id="empty-string"),
    pytest.param('"password": "{{ vault_db_password }}"', id="template"),
    pytest.param("password: !secret db_password", id="yaml-tag"),
    pytest.param('password: "<your password here>"', id="your-placeholder"),
    pytest.param("password: changeme", id="documented-default"),
    pytest.param("api_key: SecretStr = Field(...)", id="type-annotation"),
    pytest.param("user = authenticate(username=username, password=raw_password)", id="kwarg-var"),
    pytest.param("client.login(token=accessToken)", id="kwarg-camel-var"),
    pytest.param("PWD=/home/alice/projects", id="pwd-path"),
    pytest.param("private_key: ~/.ssh/id_ed25519", id="key-path"),
    pytest.param("Fixed in commit 3f786850e387550fdab836ed7e6dc881de23001b.", id="commit-sha"),
    pytest.param("see 3f78685 and a1b2c3d", id="short-sha"),
    pytest.param(
        "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", id="sha256"
    ),
    pytest.param(
        "ee26b0dd4af7e749aa1a8ee3c10ae9923f618980772e473f8819a5d4940e0db27ac185f8a0e1d5f84f88bc887"
        "fd67b143732c304cc5fa9ad8e6f57f50028a8ff",
        id="sha512",
    ),
    pytest.param("note 7c9e6679-7425-40de-944b-e07fc1f90ae7 was superseded", id="uuid"),
    pytest.param("https://example.com/search?q=token&page=2", id="url-query"),
    pytest.param("postgres://localhost:5432/app", id="url-no-user"),
    pytest.param("https://deploy@git.example.com/org/repo.git", id="url-user-only"),
    pytest.param("postgres://user:password@localhost:5432/app", id="url-doc-placeholder"),
    pytest.param("redis://:${REDIS_PASSWORD}@cache:6379/0", id="url-template-password"),
    pytest.param("http://[::1]:8080/health and https://example.com:8443/a@b", id="url-ports"),
    pytest.param("git clone git@github.com:org/repo.git", id="scp-style-git"),
    pytest.param("getAccessToken() caches; passwordResetTokenTTL is 3600", id="camel-case"),
    pytest.param("reset_password_token_ttl = 3600", id="snake-case"),
    pytest.param("max_tokens: 4096, token_count: 123456", id="token-counts"),
    pytest.param("if user.check_password(raw): login(user)", id="code"),
    pytest.param("Authorization header must be set", id="authorization-prose"),
    pytest.param(
        'curl -H "Authorization: Bearer $MEMORY_PORTAL_TOKEN" https://memory.example.com/api',
        id="curl-env-token",
    ),
    pytest.param("Authorization: Bearer <token>", id="bearer-placeholder"),
    pytest.param(
        "Bearer authentication uses bearer tokens-described-in-rfc-six-seven", id="bearer"
    ),
    pytest.param("the API expects a JWT in the header", id="jwt-prose"),
    pytest.param("payload aGVsbG8gd29ybGQ= decodes to hello world", id="base64-short"),
    pytest.param("mem_01jh3k7sr2fzt19va038kkafac and run_01jh3k7sr2fzt19va038kkafad", id="ulid"),
    pytest.param("2024-06-11T09:30:00Z, 11/06/2024", id="dates"),
    pytest.param("/var/lib/memory-portal/exports/2024-06-11.jsonl", id="file-path"),
    pytest.param(
        "## Password policy\n\n- Minimum length: 12\n- Rotate: quarterly\n- *Never* log it",
        id="markdown",
    ),
    pytest.param("task-sk-1 is done, skipped the flaky one, ask-me before merging", id="sk-prose"),
    pytest.param("deploy sk-payments-service-eu-west-1 to staging", id="sk-slug"),
    pytest.param("risk-free desk-booking-service-2024-rollout-final", id="sk-inside-word"),
    pytest.param("Blocked by PIN-42 and OPS-1337", id="issue-keys"),
    pytest.param("upgrade from v1.2.3 to 2.0.0-rc.1", id="semver"),
    pytest.param("hosts 192.168.1.10 and 10.0.0.1:8080, ::1", id="ip-addresses"),
    pytest.param("mail alice@example.com or ops+alerts@example.org", id="emails"),
    pytest.param("-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOC\n", id="public-key"),
    pytest.param("-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIE\n", id="certificate"),
    pytest.param("AKIA prefixes mark long-term AWS access key ids", id="aws-prose"),
    pytest.param("the eyJ prefix is base64 for a JSON object", id="eyj-prose"),
    pytest.param("password: [REDACTED:credential_assignment]", id="already-redacted"),
]


def test_rules_are_named_compiled_patterns():
    names = [name for name, _ in RULES]
    assert len(names) == len(set(names))
    assert all(isinstance(pattern, re.Pattern) for _, pattern in RULES)
    assert names[-1] == "credential_assignment"  # the catch-all is tried last


def test_the_corpora_cover_every_rule_and_are_large_enough():
    expected = {case.values[1] for case in SECRETS}
    assert expected == RULE_NAMES
    assert len(SECRETS) >= 30
    assert len(HARMLESS) >= 30


@pytest.mark.parametrize(("text", "rule", "secret"), SECRETS)
def test_secret_is_refused_with_its_rule(text, rule, secret):
    assert find_secret(text) == rule


@pytest.mark.parametrize(("text", "rule", "secret"), SECRETS)
def test_find_secret_never_returns_the_secret(text, rule, secret):
    found = find_secret(text)
    assert found in RULE_NAMES
    assert secret not in found


@pytest.mark.parametrize("text", HARMLESS)
def test_harmless_text_passes(text):
    assert find_secret(text) is None


@pytest.mark.parametrize("text", HARMLESS)
def test_redact_leaves_harmless_text_alone(text):
    assert redact(text) == text


@pytest.mark.parametrize(("text", "rule", "secret"), SECRETS)
def test_redact_removes_the_secret(text, rule, secret):
    redacted = redact(text)
    assert secret not in redacted
    assert "[REDACTED:" in redacted
    assert find_secret(redacted) is None


def test_redact_keeps_the_context_and_names_the_rule():
    text = "connect with password=hunter22x then postgres://app:Zq8vLm2Rt7Kp@db/app, done"
    assert redact(text) == (
        "connect with password=[REDACTED:credential_assignment] then "
        "postgres://app:[REDACTED:url_credentials]@db/app, done"
    )


def test_redact_handles_empty_text():
    assert redact("") == ""


def test_find_secret_on_empty_text():
    assert find_secret("") is None


def test_scan_fields_names_the_field_and_the_rule():
    fields = {
        "title": "Deploy notes",
        "source": None,
        "body": "staging uses password=hunter22x for now",
        "tags": "deploy, ops",
    }
    assert scan_fields(fields) == ("body", "credential_assignment")


def test_scan_fields_reports_the_first_field_in_order():
    fields = {"title": "redis://:n8Vq2LmP4x@cache:6379/0", "body": "password=hunter22x"}
    assert scan_fields(fields) == ("title", "url_credentials")


def test_scan_fields_skips_none_and_passes_harmless_fields():
    assert scan_fields({"title": "Rotate the password quarterly", "body": None}) is None
    assert scan_fields({}) is None


def _record(msg, args, exc_info=None):
    return logging.LogRecord("memory_portal", logging.INFO, __file__, 1, msg, args, exc_info)


def test_redacting_filter_redacts_the_formatted_message():
    record = _record("connecting to %s as %s", ("postgres://app:Zq8vLm2Rt7Kp@db/app", "app"))
    assert RedactingFilter().filter(record) is True
    assert "Zq8vLm2Rt7Kp" not in record.msg
    assert "[REDACTED:url_credentials]" in record.msg
    assert record.args is None
    assert record.getMessage() == record.msg


def test_redacting_filter_passes_harmless_records_unchanged():
    record = _record("saved %s for %s", ("mem_01jh3k7sr2fzt19va038kkafac", "agt_1"))
    assert RedactingFilter().filter(record) is True
    assert record.getMessage() == "saved mem_01jh3k7sr2fzt19va038kkafac for agt_1"


def test_redacting_filter_survives_mismatched_args():
    record = _record("token %s and %s", ("Bearer Q2x9vR7mK4pL8nZ3wT6yB1cF5",))
    assert RedactingFilter().filter(record) is True
    assert "Q2x9vR7mK4pL8nZ3wT6yB1cF5" not in record.getMessage()


def test_redacting_filter_redacts_the_exception_text():
    try:
        raise ConnectionError("could not connect to postgres://app:Zq8vLm2Rt7Kp@db/app")
    except ConnectionError:
        record = _record("database down", None, sys.exc_info())
    RedactingFilter().filter(record)
    formatted = logging.Formatter().format(record)
    assert "Zq8vLm2Rt7Kp" not in formatted
    assert "[REDACTED:url_credentials]" in formatted


def test_redacting_filter_works_on_a_logger(caplog):
    logger = logging.getLogger("memory_portal.tests.secrets")
    redacting = RedactingFilter()
    logger.addFilter(redacting)
    try:
        with caplog.at_level(logging.INFO, logger=logger.name):
            logger.info("header was %s", "Authorization: Bearer 9LJm7R04ZhbGSdGWoZ6axl7KBGgM")
    finally:
        logger.removeFilter(redacting)
    assert "9LJm7R04ZhbGSdGWoZ6axl7KBGgM" not in caplog.text
    assert "[REDACTED:bearer_header]" in caplog.text


@pytest.mark.parametrize(
    "text",
    [
        "a" * 100_000,
        "password=" * 5000,
        "password: " * 5000,
        "a." * 50_000,
        "sk-" * 30_000,
        "-----BEGIN PRIVATE KEY-----" * 3000,
        '"type": "service_account" ' * 3000,
        "Authorization: Bearer " * 5000,
        "x" * 50_000 + "://" + "y" * 50_000,
    ],
    ids=lambda text: repr(text[:12]),
)
def test_hostile_input_returns(text):
    # No timing assertion: a catastrophic backtrack would hang here, not fail.
    find_secret(text)
    redact(text)


def test_long_harmless_text_passes():
    text = "\n".join(case.values[0] for case in HARMLESS)
    text = (text + "\n") * (8000 // len(text) + 1)
    assert len(text) >= 8000
    assert find_secret(text) is None
