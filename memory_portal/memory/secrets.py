"""Secret detection for memory writes and log lines: refuse credentials, redact them in logs.

Two layers (docs/SECRETS.md): the product's own rules (`RULES`: credential assignments, URL
passwords, command-line passwords, prose, signed URLs and the tokens agents paste most), tried
first, then a maintained open rule set, Kingfisher's built-in rules (`maintained`), for the long
tail of vendor token shapes."""

from __future__ import annotations

import base64
import binascii
import html
import json
import logging
import re
import sys
import threading
import unicodedata
from functools import cache
from urllib.parse import unquote

# Every pattern below is either anchored on a literal prefix or starts only at the beginning of
# a token (lookbehind), and every open-ended repetition is bounded or possessive, so a scan stays
# linear even on hostile input ('a' * 100_000, 'password=' * 5000).

# --- Placeholders ----------------------------------------------------------------------------
# Values that refer to a secret instead of being one. Documentation, config templates and code
# snippets are full of them, and refusing those would make the check useless.

# The end of a placeholder word: it is the whole value, not the start of a longer literal.
_TERM = r"""(?![^\s"'`,;:.)\]}@&])"""

# Stand-ins that are obviously not the real thing: type names, status words, template filler.
# `changeme` and friends are documented defaults, not secrets worth refusing a write over.
_WORDS = (
    r"(?:none|null|nil|undefined|true|false|empty|unset|required|optional|missing|expired"
    r"|invalid|unknown|hidden|omitted|removed|rotated|revoked|provided|changed|redacted|masked"
    r"|placeholder|example|sample|dummy|fake|test|todo|tbd|fixme|changeme|change[_-]?me"
    r"|replace[_-]?me|password|passwd|pass|pwd|secret|token|string|str|bytes"
    r"|your\w*|my[_-]?(?:password|secret|token|api[_-]?key))"
)

# Masks such as `********`, `xxxxxx`, `••••`, `XXXX-XXXX`.
_MASK = r"[*x•#.-]{3,}+"

# Template / environment / file references: `${DB_PASSWORD}`, `{{ vault_pw }}`, `<redacted>`,
# `%(pw)s`, `[REDACTED:…]` (so redacted text stays clean), YAML tags like `!secret db_pw`,
# file paths, and environment or vault lookups.
_REF = (
    r"(?:\$|\{|<|%|\[|!|/|~/|\./|\.\./"
    r"|os\.|settings\.|process\.env|(?:env|environ|getenv|config|vault)\b)"
)

# A vendor prefix followed by a mask or an ellipsis: `sk_live_xxxxxxxxxxxxxxxx`,
# `ghp_XXXXXXXXXXXXXXXX`, `sk-...`, `sk-proj-…`.
_PREFIXED_MASK = r"(?:[A-Za-z0-9]{1,12}[_-]){1,3}(?:x{8,}+|X{8,}+|\*{8,}+|\.{3,}+|…)"

_PLACEHOLDER = rf"(?:{_REF}|(?:{_WORDS}|{_MASK}|{_PREFIXED_MASK}){_TERM})"

# Characters of an unquoted value: up to whitespace, a quote or a list separator.
_BARE = r"""[^\s"'`,;]"""

# Unquoted values that are code, not literals: `settings.API_KEY`, `get_token()`,
# `env["X"]`, and variables named after what they hold (`raw_password`, `API_KEY`,
# `accessToken`): a literal that happens to contain such a word is rare, a variable common.
_CODE = (
    r"(?:[a-z_]\w*\.[a-z_]"
    rf"|{_BARE}{{0,200}}?[(\[]"
    r"|[a-z_]\w*?(?:(?<![a-z0-9])(?:password|passwd|pwd|secret|token|key)"
    r"|(?-i:(?<=[a-z])(?:Password|Passwd|Pwd|Secret|Token|Key)))(?:_\w*)?"
    r"(?![^\s\"'`,;)\]}]))"
)

# Key names that announce a credential. Any prefix is allowed (`DB_PASSWORD`, `client_secret`,
# `x-api-key`) but the key must end with one of these, so `password_reset_ttl` or `max_tokens`
# are not keys of this kind.
_KEY = (
    r"(?:pass(?:word|wd|phrase)|pwd|secret|api[_-]?key|access[_-]?key|token"
    r"|private[_-]?key|secret[_-]?key)"
)

_CREDENTIAL_ASSIGNMENT = (
    rf"(?<![\w.-])[\w.-]*?{_KEY}[\"']?[ \t]*(?:=>|:=|==|[:=])[ \t]*"
    r"(?P<secret>"
    rf"\"(?!{_PLACEHOLDER})[^\"\n]{{6,}}+\""
    rf"|'(?!{_PLACEHOLDER})[^'\n]{{6,}}+'"
    # A bare value followed by `=` is a type annotation (`api_key: SecretStr = Field()`).
    rf"|(?!{_PLACEHOLDER}|{_CODE}){_BARE}{{6,}}+(?![ \t]*=)"
    r")"
)

# A URL password is only a reference when it is a template or an obvious placeholder;
# `%` starts percent-encoding here, so it stays a literal.
_URL_PLACEHOLDER = rf"(?:\$|\{{|<|\[|(?:{_WORDS}|{_MASK}){_TERM})"

# Real keys are random; `sk-` followed by lowercase words joined by hyphens is a slug or
# a Kubernetes-style name (`sk-payments-eu-west-1`), so it needs a capital or no hyphen.
_OPENAI_KEY = (
    r"(?<![\w-])sk-(?:proj-|svcacct-|admin-)?"
    r"(?![a-z0-9]*-[a-z0-9-]*(?![\w-]))(?=[\w-]*\d)[\w-]{20,}+"
)

# AWS access key ids. AWS reserves AKIAIOSFODNN7EXAMPLE for its documentation: notes quoting
# the docs are common, and a real key id ending in EXAMPLE is vanishingly unlikely.
_AWS_KEY_ID = r"(?:AKIA|ASIA|ABIA|ACCA)(?![0-9A-Z]{9}EXAMPLE(?![0-9A-Z]))[0-9A-Z]{16}\b"

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![\w-])"

# --- Signed URLs -------------------------------------------------------------------------------
# Whoever holds a signed URL holds the object until it expires, so the signature (and the key
# id or session token next to it) is the secret; parameter names and `<signature>` are docs.

_AWS_PRESIGNED_URL = (
    r"(?<![\w-])(?i:x-amz-)(?:"
    r"(?i:signature)=(?P<secret>[0-9a-fA-F]{64})(?![0-9a-fA-F])"
    rf"|(?i:credential)=(?P<secret2>{_AWS_KEY_ID})"
    rf"|(?i:security-token)=(?!(?i:{_URL_PLACEHOLDER}))(?P<secret3>[\w%/+=-]{{16,}}+)"
    r")"
)

# Signature-v2 style `Signature=` (S3 and GCS v2 signing, CloudFront): base64, often
# percent-encoded or in CloudFront's URL-safe alphabet.
_SIGNED_URL = (
    rf"(?<![\w.-])Signature=(?!(?i:{_URL_PLACEHOLDER}))(?P<secret>[\w%+/~-]{{20,}}+={{0,2}})"
)

# --- Container and package registries ----------------------------------------------------------
# docker / podman `config.json` store base64("user:password") as `{"auth": "…"}`; Kubernetes
# keeps the whole file base64-encoded (`.dockerconfigjson`, which starts `{"auths":` →
# `eyJhdXRocyI6`); `.npmrc` has the same base64 pair as `_auth=`.
_REGISTRY_AUTH = (
    r"\{\s*+\"auth\"\s*+:\s*+\""
    rf"(?!(?i:(?:{_WORDS}|{_MASK}){_TERM}))(?P<secret>[A-Za-z0-9+/]{{12,}}+={{0,2}})\""
    r"|\beyJhdXRocyI6[A-Za-z0-9+/]{16,}+={0,2}"
    r"|(?<![\w-])_auth[ \t]*+=[ \t]*+(?P<secret2>[A-Za-z0-9+/]{12,}+={0,2})"
)

# --- Passwords on command lines ----------------------------------------------------------------
# Tools that take the password as an argument. Each command is followed by at most 30 plain
# arguments (possessive, so a long line costs one pass) before its password flag; a flag that
# only makes the tool prompt (`mysql -p`, `ldapsearch -W`) or reads a file, stdin or an
# environment variable is not matched.

_VALUE_END = r"""[^\s"'`;|&<>]"""


def _flag_value(group: str, *, min_len: int = 1, prose: bool = False) -> str:
    """A flag's value, quoted or bare, that is not a reference or placeholder. With `prose`,
    also not a variable name nor a lowercase word: `--token together with --user` is a
    sentence, and the space-separated long flags are where prose shows up."""
    ref = rf"(?!(?i:{_PLACEHOLDER}))"
    guard = rf"(?![a-z]++(?!{_VALUE_END}))(?!(?i:{_CODE}))" if prose else ""
    return (
        rf"(?P<{group}>\"{ref}[^\"\n]{{{min_len},}}+\""
        rf"|'{ref}[^'\n]{{{min_len},}}+'"
        rf"|{ref}{guard}(?![-\"']){_VALUE_END}{{{min_len},}}+)"
    )


def _after_args(flag: str) -> str:
    return rf"(?:[ \t]++(?!{flag})[^\s|;&<>]++){{0,30}}+[ \t]++"


_CLI_PASSWORD = "|".join(
    (
        # `--password S3cret`, `--db-password …`, `--api-token …`, keytool's `-storepass …`;
        # the `--password=…` form is a credential assignment.
        r"(?<![\w-])--?(?:\w++-){0,4}?"
        r"(?i:password|passwd|pwd|passphrase|token|api-?key|secret-key|client-secret"
        r"|storepass|keypass)[ \t]++" + _flag_value("secret", min_len=6, prose=True),
        # mysql and friends: `-pS3cret` (attached; a bare `-p` prompts).
        r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlcheck|mysqlshow|mysqlpump|mysqlslap"
        r"|mariadb|mariadb-dump|mariadb-admin)(?![\w-])"
        + _after_args("-p")
        + "-p"
        + _flag_value("secret2"),
        r"\bsshpass(?![\w-])" + _after_args("-p") + r"-p[ \t]*+" + _flag_value("secret3"),
        r"(?<![\w-])SSHPASS[ \t]*+=[ \t]*+" + _flag_value("secret4"),
        r"\b(?:docker|podman|nerdctl|buildah|skopeo|oras|helm[ \t]++registry)[ \t]++login"
        r"(?![\w-])" + _after_args("-p") + r"-p[ \t]++" + _flag_value("secret5"),
        r"\bcurl(?![\w-])"
        + _after_args("-u|--user")
        + r"(?:-u[ \t]*+|--user[ \t]++)[\"']?[^\s:\"'$]{1,100}+:"
        + rf"(?!(?i:{_PLACEHOLDER}))(?P<secret6>[^\s\"'@]{{3,}}+)",
        r"\bredis-cli(?![\w-])"
        + _after_args("-a|--pass")
        + r"(?:-a|--pass)[ \t]++"
        + _flag_value("secret7"),
        # openssl `-passin pass:…` / `-passout pass:…` (`env:` and `file:` are references).
        r"(?<![\w-])-pass(?:in|out)?[ \t]++pass:" + _flag_value("secret8"),
        r"\bldap(?:search|modify|add|delete|passwd|whoami|compare|modrdn|exop)(?![\w-])"
        + _after_args("-w")
        + r"-w[ \t]++"
        + _flag_value("secret9"),
    )
)

# A password stated in prose: "the admin password is …", "password for the grafana admin: …",
# "db login is app_rw / …". Only a value that looks like a password counts — 8 to 64
# characters mixing letters with digits or symbols, not a placeholder word — so "the password
# field is required" or "password: changeme" stay prose.
def _password_value(group: str) -> str:
    return (
        r"(?![\"'`]?(?i:" + _PLACEHOLDER + r"))[\"'`]?"
        rf"(?P<{group}>(?=[^\s\"'`]*[A-Za-z])(?=[^\s\"'`]*[0-9!#$%&*+=?@^~])"
        r"(?![^\s\"'`]*[(\[])[^\s\"'`]{8,64}(?<![.,;:)]))"
    )


_PROSE_PASSWORD = (
    r"(?i:\b(?:password|passphrase|passwd|pwd)\b(?:[ \t]+(?:for|of|on)[ \t]+[^\n.:=]{1,40}?)?"
    r"(?:[ \t]+(?:is|was|will[ \t]+be|stays)[ \t]+|[ \t]*:[ \t]+))" + _password_value("secret")
    + r"|(?i:\blogin\b[ \t]+(?:is|was|:)[ \t]+[\w.@-]{1,40}+[ \t]*/[ \t]*)"
    + _password_value("secret2")
)


RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, flags))
    for name, pattern, flags in (
        (
            "private_key",
            r"-----BEGIN (?:(?:RSA|EC|DSA|OPENSSH|PGP|ENCRYPTED|SSH2 ENCRYPTED) )?"
            r"PRIVATE KEY(?: BLOCK)?-----"
            # Redact the body (base64, PEM headers, JSON-escaped newlines) and the END line;
            # possessive, so a thousand BEGIN lines without an END stay linear.
            r"(?:[\w+/=\s\\:,.]++|-(?!----))*+"
            r"(?:-----END [A-Z0-9 ]{0,20}PRIVATE KEY(?: BLOCK)?-----)?",
            0,
        ),
        (
            "url_credentials",
            r"\b[a-z][a-z0-9+.-]{0,30}://[^\s:/?#@]{0,200}:"
            rf"(?!{_URL_PLACEHOLDER})(?P<secret>[^\s/?#@]{{1,200}})@[^\s/?#@]",
            re.IGNORECASE,
        ),
        ("aws_presigned_url", _AWS_PRESIGNED_URL, 0),
        (
            "gcs_signed_url",
            r"(?<![\w-])(?i:x-goog-signature)=(?P<secret>[0-9a-fA-F]{64,}+)",
            0,
        ),
        (
            "azure_sas_token",
            # The HMAC-SHA256 of a shared access signature: 43 base64 characters and a padding
            # `=` (often percent-encoded).
            r"(?<![\w.-])sig=(?P<secret>[A-Za-z0-9%+/]{30,}+={0,2})",
            0,
        ),
        ("signed_url", _SIGNED_URL, 0),
        ("aws_access_key", rf"\b{_AWS_KEY_ID}", 0),
        (
            "aws_secret_key",
            r"\baws_?secret(?:_?access)?_?key[\"']?[ \t]*(?:=>|[:=])[ \t]*[\"']?"
            r"(?P<secret>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
            re.IGNORECASE,
        ),
        (
            "gcp_service_account",
            r"\"private_key_id\"\s*:\s*\"(?P<secret>[0-9a-f]{40})\""
            r"|\"type\"\s*:\s*\"service_account\"(?=[^{}]{0,1000}?\"private_key\"\s*:)",
            0,
        ),
        ("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])", 0),
        (
            "azure_storage_key",
            r"\b(?:AccountKey|SharedAccessKey)=(?P<secret>[A-Za-z0-9+/]{40,}+={0,2})",
            0,
        ),
        (
            "github_token",
            r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b",
            0,
        ),
        ("gitlab_token", r"\bglpat-[A-Za-z0-9_-]{20,}+", 0),
        ("slack_token", r"\b(?:xox[baprse]|xapp)-[A-Za-z0-9-]{10,}+", 0),
        (
            "slack_webhook",
            # Slack's documentation uses an all-X secret (`…/B00000000/XXXXXXXX…`).
            r"\bhooks\.slack\.com/(?:services/T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/"
            r"(?!X{16,}+(?![A-Za-z0-9]))[A-Za-z0-9]{16,}"
            r"|(?:workflows|triggers)/T[A-Z0-9]{6,}+/(?:A[A-Z0-9]{6,}+/)?[0-9]{6,}+/"
            r"[A-Za-z0-9]{16,})",
            0,
        ),
        (
            "discord_token",
            # base64(user id) . base64(timestamp) . HMAC; user ids start with a digit (M, N, O).
            r"(?<![\w-])[MNO][\w-]{23,27}\.[\w-]{6,7}\.[\w-]{27,40}(?![\w-])",
            0,
        ),
        (
            "discord_webhook",
            r"\bdiscord(?:app)?\.com/api/webhooks/[0-9]{17,20}/(?P<secret>[\w-]{60,68})(?![\w-])",
            0,
        ),
        (
            "telegram_bot_token",
            # `<bot id>:<35 characters starting with A>`, also inside `api.telegram.org/bot…`.
            r"(?<![\w:])(?:bot)?(?P<secret>[0-9]{5,16}:A[\w-]{34})(?![\w-])",
            0,
        ),
        (
            "teams_webhook",
            r"(?:\.webhook\.office\.com/webhookb2|\boutlook\.office(?:365)?\.com/webhook)"
            rf"/{_UUID}@{_UUID}/IncomingWebhook/(?P<secret>[0-9a-f]{{32}})/",
            0,
        ),
        # A mask (`sk_live_xxxxxxxx…`) is a documentation placeholder, not a key.
        ("stripe_key", r"\b(?:sk|rk)_(?:live|test)_(?![xX*]{16})[0-9A-Za-z]{16,}+", 0),
        # HashiCorp Vault service, batch and recovery tokens.
        ("vault_token", r"(?<![\w.])hv[sbr]\.[\w-]{24,}+", 0),
        # Doppler service, service-account, CLI, personal, SCIM and audit tokens.
        (
            "doppler_token",
            r"(?<![\w.])dp\.(?:st|sa|ct|pt|scim|audit)\.(?:[\w-]{1,40}\.)?[A-Za-z0-9]{40,44}\b",
            0,
        ),
        # age identities (X25519 secret keys, Bech32 upper case).
        ("age_secret_key", r"\bAGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}\b", 0),
        # A kubeconfig's user key, base64; `REDACTED` and short stand-ins are too short.
        (
            "kubeconfig_client_key",
            r"\bclient-key-data:[ \t]*[\"']?(?P<secret>[A-Za-z0-9+/]{24,}+={0,2})",
            0,
        ),
        ("square_token", r"\bsq0(?:csp|atp|idp)-[\w-]{22,43}\b", 0),
        ("okta_token", r"\bSSWS[ \t]+(?P<secret>00[\w-]{40})\b", 0),
        ("alibaba_access_key", r"\bLTAI[A-Za-z0-9]{12,20}\b", 0),
        ("mapbox_secret_token", r"\bsk\.eyJ[\w-]{20,}+\.[\w-]{20,}+", 0),
        ("anthropic_key", r"(?<![\w-])sk-ant-[\w-]{20,}+", 0),
        ("openai_key", _OPENAI_KEY, 0),
        ("npm_token", r"\bnpm_[A-Za-z0-9]{36}\b", 0),
        # This project's own API tokens (tokens.py: `mp_<12 hex>_<token_urlsafe(32)>`).
        ("memory_portal_token", r"\bmp_[0-9a-f]{12}_[\w-]{40,}+", 0),
        ("sendgrid_key", r"\bSG\.[\w-]{22}\.[\w-]{43}(?![\w-])", 0),
        (
            "mailgun_key",
            r"(?<![\w-])(?:key-[0-9a-z]{32}|[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8})(?![\w-])",
            0,
        ),
        (
            "mailchimp_key",
            # Marketing API keys end with their datacenter; Mandrill (Transactional) keys
            # start with `md-`.
            r"(?<![\w-])(?:[0-9a-f]{32}-us[0-9]{1,2}"
            r"|md-(?=[\w-]{0,21}[0-9])(?=[\w-]{0,21}[A-Z])[\w-]{22})(?![\w-])",
            0,
        ),
        ("brevo_key", r"\bx(?:keysib|smtpsib)-[0-9a-f]{64}-[A-Za-z0-9]{16}\b", 0),
        (
            "resend_key",
            r"(?<![\w-])re_(?=\w{0,40}?[0-9])[A-Za-z0-9]{6,12}_[A-Za-z0-9]{20,32}(?![\w-])",
            0,
        ),
        (
            "postmark_token",
            # Postmark server and account tokens are UUIDs: only a Postmark context tells them
            # from any other id.
            r"(?i:postmark)(?:[\w.-]{0,40}?(?i:token|key)[\"']?[ \t]*(?:=>|[:=])[ \t]*[\"']?"
            r"|\w{0,40}+(?:\.\w{1,40}+)?\([ \t]*(?:\w{1,40}+[ \t]*=[ \t]*)?[\"'])"
            rf"(?P<secret>{_UUID})",
            0,
        ),
        ("registry_auth", _REGISTRY_AUTH, 0),
        (
            "jwt",
            r"\beyJ[\w-]{10,}+\.[\w-]{10,}+\.[\w-]{10,}+",
            0,
        ),
        (
            "bearer_header",
            r"\bAuthorization[\"']?[ \t]*[:=][ \t]*[\"']?(?:Bearer|Basic|Token)[ \t]+"
            rf"(?!{_URL_PLACEHOLDER})(?P<secret>[\w.~+/=-]{{8,}}+)"
            # Outside a header, demand a token-sized value so "bearer tokens-in-prose" passes.
            r"|(?-i:\bBearer)[ \t]+(?![a-z-]+(?![\w.~+/=]))"
            rf"(?!{_URL_PLACEHOLDER})(?P<secret2>[\w.~+/=-]{{20,}}+)",
            re.IGNORECASE,
        ),
        (
            "netrc_credentials",
            # `machine <host> login <user> password <secret>`, on one line or several. The host
            # must look like one, so "the machine learning login page" stays prose.
            r"(?<![\w-])machine[ \t]++(?:[\w-]++\.[\w.-]++|localhost)"
            r"(?:\s++(?:login|account|port)[ \t]++\S++){0,3}+\s++password[ \t]++"
            rf"(?!(?i:{_PLACEHOLDER}))(?P<secret>\S{{4,}}+)",
            0,
        ),
        ("cli_password", _CLI_PASSWORD, 0),
        ("prose_password", _PROSE_PASSWORD, 0),
        (
            "prose_passphrase",
            # A passphrase of plain words: quoted, or words joined by hyphens (diceware).
            r"(?i:\bpass[ -]?phrase\b(?:[ \t]+(?:for|of|on)[ \t]+[^\n.:=]{1,40}?)?"
            r"(?:[ \t]+(?:is|was|will[ \t]+be|stays)[ \t]+|[ \t]*[:=][ \t]*))"
            r"(?P<secret>\"(?![^\"\n]*[<$%{])[^\"\n]{12,80}+\"|'(?![^'\n]*[<$%{])[^'\n]{12,80}+'"
            r"|[A-Za-z]{3,12}(?:-[A-Za-z0-9]{2,12}){3,8}+(?![\w-]))",
            0,
        ),
        (
            "django_secret_key",
            # Django's generated key: `django-insecure-` and 50 characters of its alphabet,
            # parentheses included (which is why an assignment of it reads as code otherwise).
            r"\bdjango-insecure-(?P<secret>[a-z0-9!@#$%^&*(\-_=+)]{30,}+)",
            0,
        ),
        (
            "twilio_auth_token",
            # An account SID is public; the 32-hex auth token written next to it is not.
            r"\bAC[0-9a-f]{32}\b[^\n]{0,60}?(?<![0-9A-Za-z])(?P<secret>[0-9a-f]{32})(?![0-9A-Za-z])",
            0,
        ),
        ("credential_assignment", _CREDENTIAL_ASSIGNMENT, re.IGNORECASE),
    )
)


class MaintainedRules:
    """Kingfisher's built-in rules (kingfisher-secret-scanner, MongoDB's open-source scanner,
    Apache-2.0): its own rules and the gitleaks-derived "betterleaks" ones, about 490 at medium
    confidence, compiled once per process with vectorscan (about 3.5 s; 0.4 s from the rule
    cache it keeps under the user's cache directory, or KF_RULE_CACHE_DIR) and scanned
    in-process, offline, in microseconds. One scanner per thread over the shared rules.

    A finding whose value is a placeholder (`password`, `changeme`, a mask, a run of one
    character such as a documentation's `XXXXXXXX`) is dropped, as the product's own rules
    let placeholders pass."""

    CONFIDENCE = "medium"

    def __init__(self) -> None:
        self._rules = None
        self._lock = threading.Lock()
        self._local = threading.local()

    def _scanner(self):
        scanner = getattr(self._local, "scanner", None)
        if scanner is None:
            from kingfisher_sdk import Rules, Scanner

            with self._lock:
                if self._rules is None:
                    self._rules = Rules(confidence=self.CONFIDENCE)
            scanner = self._local.scanner = Scanner(self._rules)
        return scanner

    def load(self) -> None:
        """Compile (or load) the rules now: a server process does it before its first request."""
        self._scanner()

    def findings(self, text: str, *, placeholders: bool = False) -> list[tuple[str, str]]:
        """(rule id, matched value) of each finding in `text`, placeholders left out unless
        `placeholders` (the scanner as shipped, which an evaluation compares with ours)."""
        found = []
        for finding in self._scanner().scan(text):
            value = finding.secret
            if not finding.visible:
                continue
            if placeholders or (value and not _PLACEHOLDER_VALUE.search(value)):
                found.append((finding.rule_id, value))
        return found


# A maintained rule's match that holds a placeholder, a run of one character or text this
# module already redacted (`postgres://app:[REDACTED:url_credentials]@db`) is no secret.
_PLACEHOLDER_VALUE = re.compile(rf"(?i)^(?:{_WORDS}|{_MASK})$|(.)\1{{7}}|\[REDACTED:")

maintained = MaintainedRules()


# What a rule's match always contains (lower case): a rule none of whose keywords is in the
# text cannot fire, so it is not run (the keyword prefilter of gitleaks-style scanners). Rules
# left out run on every text. `test_secrets.py` checks, on every corpus text, that the
# prefilter changes no rule's answer.
KEYWORDS: dict[str, tuple[str, ...]] = {
    "private_key": ("private key",),
    "url_credentials": ("://",),
    "aws_presigned_url": ("x-amz-",),
    "gcs_signed_url": ("x-goog-signature=",),
    "azure_sas_token": ("sig=",),
    "signed_url": ("signature=",),
    "aws_access_key": ("akia", "asia", "abia", "acca"),
    "aws_secret_key": ("aws",),
    "gcp_service_account": ('"private_key_id"', '"service_account"'),
    "google_api_key": ("aiza",),
    "azure_storage_key": ("accountkey=", "sharedaccesskey="),
    "github_token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "gitlab_token": ("glpat-",),
    "slack_token": ("xox", "xapp-"),
    "slack_webhook": ("hooks.slack.com/",),
    "discord_webhook": ("discord",),
    "telegram_bot_token": (":",),
    "teams_webhook": ("webhook",),
    "stripe_key": ("sk_live_", "sk_test_", "rk_live_", "rk_test_"),
    "vault_token": ("hvs.", "hvb.", "hvr."),
    "doppler_token": ("dp.",),
    "age_secret_key": ("age-secret-key-1",),
    "kubeconfig_client_key": ("client-key-data:",),
    "square_token": ("sq0",),
    "okta_token": ("ssws",),
    "alibaba_access_key": ("ltai",),
    "mapbox_secret_token": ("sk.eyj",),
    "anthropic_key": ("sk-ant-",),
    "openai_key": ("sk-",),
    "npm_token": ("npm_",),
    "memory_portal_token": ("mp_",),
    "sendgrid_key": ("sg.",),
    "mailchimp_key": ("-us", "md-"),
    "brevo_key": ("xkeysib-", "xsmtpsib-"),
    "resend_key": ("re_",),
    "postmark_token": ("postmark",),
    "registry_auth": ('"auth"', "eyjhdxrocyi6", "_auth"),
    "jwt": ("eyj",),
    "bearer_header": ("authorization", "bearer"),
    "netrc_credentials": ("machine",),
    "cli_password": (
        "pass", "pwd", "token", "api", "secret", "key", "mysql", "mariadb", "login", "curl",
        "redis-cli", "ldap",
    ),  # fmt: skip
    "prose_password": ("pass", "pwd", "login"),
    "prose_passphrase": ("phrase",),
    "django_secret_key": ("django-insecure-",),
    "twilio_auth_token": ("ac",),
    "credential_assignment": ("pass", "pwd", "secret", "key", "token"),
}
_PREFILTERED = tuple((name, pattern, KEYWORDS.get(name)) for name, pattern in RULES)


def _own_rule(text: str) -> str | None:
    lowered = text.lower()
    for name, pattern, keywords in _PREFILTERED:
        if keywords is not None and not any(k in lowered for k in keywords):
            continue
        if pattern.search(text):
            return name
    return None


def _rule_in(text: str) -> str | None:
    name = _own_rule(text)
    if name is not None:
        return name
    found = maintained.findings(text)
    return found[0][0] if found else None


def find_secret(text: str) -> str | None:
    """Return the NAME of the first rule that fires (e.g. "private_key", "aws_access_key",
    "credential_assignment", or a maintained rule's id such as "kingfisher.twilio.1"), or None
    when the text looks harmless. Never returns the matched text. The text is scanned as sent,
    then as a reader would see it and as its encoded runs decode (`hidden_views`)."""
    if not text:
        return None
    name = _rule_in(text)
    if name is not None:
        return name
    return _hidden_rule(text)


# --- Secrets hidden from the rules ----------------------------------------------------------
# A person reads past what a rule cannot: invisible characters inside a token, look-alike
# letters from other scripts, fullwidth forms, accents, a token spaced out or broken over two
# lines, escapes, and a credential file pasted as base64 or hex. Each text that passes the
# rules as sent is scanned again as it reads (`unhidden`) and as its encoded runs decode; a
# hit is reported under the rule that fires there.

# Escapes in code and markup: `\u0070`, `\x70`, `&#112;`, `&#x70;`, `&amp;`, `%70`.
_ESCAPE = re.compile(
    r"\\u[0-9a-fA-F]{4}|\\x[0-9a-fA-F]{2}|&#[xX]?[0-9a-fA-F]{1,6};?|&[a-zA-Z]{2,8};|%[0-9a-fA-F]{2}"
)
_JSON_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\x([0-9a-fA-F]{2})")
# Eight or more single characters each followed by one space or tab: "g h p _ R 8 v K".
_SPACED_RUN = re.compile(r"(?<!\S)(?:\S[ \t]){7,}+\S(?!\S)")
# A line break inside a token: a line ending in 10 or more token characters, and a next line
# that is nothing but 6 or more of them (the token's rest). Prose and lists seldom do that.
_BROKEN_LINE = re.compile(
    r"(?<=[\w+/-]{10})[ \t]*\r?\n[ \t]*(?=[\w+/-]{6,}+=*[ \t]*(?:\r?\n|\Z))"
)
# Runs long enough to hide a credential: 24+ base64 characters (18 bytes), 32+ hex digits.
_BASE64_RUN = re.compile(r"(?<![\w+/=-])[A-Za-z0-9+/_-]{24,}+={0,2}+(?![\w+/=-])")
_HEX_RUN = re.compile(r"(?<![0-9A-Za-z])(?:[0-9A-Fa-f]{2}){16,}+(?![0-9A-Za-z])")
_MAX_DECODED = 16  # runs decoded per text


@cache
def _invisible_table() -> dict[int, None]:
    """Every format (Cf: zero-width spaces and joiners, the soft hyphen, direction marks) and
    combining (Mn, Me: accents) character, to delete."""
    return {
        cp: None
        for cp in range(sys.maxunicode + 1)
        if unicodedata.category(chr(cp)) in ("Cf", "Mn", "Me")
    }


@cache
def _confusables_table() -> dict[int, str]:
    """Letters and digits of other scripts that look like an ASCII one (Cyrillic `р`, Greek
    `ο`, …), mapped to it: Unicode's confusables as the `confusable-homoglyphs` package ships
    them (TR39)."""
    import confusable_homoglyphs

    path = f"{confusable_homoglyphs.__path__[0]}/confusables.json"
    with open(path, encoding="utf-8") as data:
        confusables = json.load(data)
    table = {}
    for char, lookalikes in confusables.items():
        if len(char) != 1 or char.isascii():
            continue
        for lookalike in lookalikes:
            if len(lookalike["c"]) == 1 and lookalike["c"].isascii() and lookalike["c"].isalnum():
                table[ord(char)] = lookalike["c"]
                break
    return table


def _unescaped(text: str) -> str:
    text = _JSON_ESCAPE.sub(lambda m: chr(int(m.group(1) or m.group(2), 16)), text)
    if "&" in text:
        text = html.unescape(text)
    if "%" in text:
        text = unquote(text)
    return text


def unhidden(text: str) -> str:
    """`text` as a person reads it: escapes decoded; NFKD, format and combining characters
    removed, look-alike letters mapped to ASCII, NFKC (fullwidth forms, ligatures,
    no-break spaces); spaced-out runs closed up; tokens broken over two lines joined."""
    if _ESCAPE.search(text):
        text = _unescaped(text)
    if not text.isascii():
        text = unicodedata.normalize("NFKD", text).translate(_invisible_table())
        text = unicodedata.normalize("NFKC", text.translate(_confusables_table()))
    text = _SPACED_RUN.sub(lambda m: re.sub(r"[ \t]", "", m.group()), text)
    return _BROKEN_LINE.sub("", text) if "\n" in text else text


def _decoded(run: bytes | None) -> str | None:
    """A decoded run as text, when it is text (UTF-8, printable): else None."""
    if not run:
        return None
    try:
        decoded = run.decode("utf-8")
    except UnicodeDecodeError:
        return None
    printable = sum(1 for c in decoded if c.isprintable() or c in "\n\r\t")
    return decoded if printable == len(decoded) else None


def _decoded_runs(text: str):
    """The text of each base64 or hex run of `text` that decodes to text."""
    seen = 0
    for match in _HEX_RUN.finditer(text):
        found = _decoded(bytes.fromhex(match.group()))
        if found is not None:
            seen += 1
            yield found
        if seen >= _MAX_DECODED:
            return
    for match in _BASE64_RUN.finditer(text):
        run = match.group()
        try:
            raw = base64.b64decode(
                run + "=" * (-len(run) % 4), altchars=b"-_" if "-" in run or "_" in run else None
            )
        except (binascii.Error, ValueError):
            continue
        found = _decoded(raw)
        if found is not None:
            seen += 1
            yield found
        if seen >= _MAX_DECODED:
            return


def hidden_views(text: str):
    """The readings of `text` the rules did not see as sent: as it reads (when that differs)
    and the text its encoded runs decode to."""
    shown = unhidden(text)
    if shown != text:
        yield shown
    yield from _decoded_runs(text)
    if shown != text:
        yield from _decoded_runs(shown)


def load() -> None:
    """Everything the scanner builds once per process, built now (a server worker does it
    before its first request): the maintained rules (seconds) and the tables of the second
    reading (0.1 s)."""
    maintained.load()
    _invisible_table()
    _confusables_table()


def _hidden_rule(text: str) -> str | None:
    for view in hidden_views(text):
        name = _rule_in(view)
        if name is not None:
            return name
    return None


def scan_fields(fields: dict[str, str | None]) -> tuple[str, str] | None:
    """Scan several named fields; return (field_name, rule_name) of the first hit or None.
    None values are skipped."""
    for field, value in fields.items():
        if value is None:
            continue
        rule = find_secret(value)
        if rule is not None:
            return field, rule
    return None


def _secret_span(match: re.Match[str]) -> tuple[int, int]:
    # Rules that capture a `secret*` group keep their context (`password=`, the URL's host)
    # readable and redact only the value; the others redact the whole match.
    for group in match.re.groupindex:
        if group.startswith("secret") and match.start(group) != -1:
            return match.span(group)
    return match.span()


def redact(text: str) -> str:
    """Replace every secret-shaped span with "[REDACTED:<rule>]" and return the new text
    (used on anything logged). A secret only a hidden view shows (`hidden_views`) has no span
    in the text: the line holding it is replaced, or the whole text when it spans lines."""
    if not text:
        return text
    return _redact_hidden(_redact_shown(text))


def _redact_hidden(text: str) -> str:
    if _hidden_rule(text) is None:
        return text
    lines = text.split("\n")
    for number, line in enumerate(lines):
        rule = _hidden_rule(line) if line else None
        if rule is not None:
            lines[number] = f"[REDACTED:{rule}]"
    text = "\n".join(lines)
    rule = _hidden_rule(text)
    return text if rule is None else f"[REDACTED:{rule}]"


def _redact_shown(text: str) -> str:
    spans: list[tuple[int, int, int]] = []
    lowered = text.lower()
    for rank, (_, pattern, keywords) in enumerate(_PREFILTERED):
        if keywords is not None and not any(k in lowered for k in keywords):
            continue
        for match in pattern.finditer(text):
            start, end = _secret_span(match)
            if end > start:
                spans.append((start, end, rank))
    if not spans:
        return _redact_maintained(text)
    # Rules overlap (a JSON "private_key" field holding a PEM block): merge overlapping spans
    # so no character of either survives, labelled like find_secret would (first rule wins).
    spans.sort()
    merged: list[list[int]] = []
    for start, end, rank in spans:
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
            merged[-1][2] = min(merged[-1][2], rank)
        else:
            merged.append([start, end, rank])
    parts: list[str] = []
    cursor = 0
    for start, end, rank in merged:
        parts.append(text[cursor:start])
        parts.append(f"[REDACTED:{RULES[rank][0]}]")
        cursor = end
    parts.append(text[cursor:])
    return _redact_maintained("".join(parts))


def _redact_maintained(text: str) -> str:
    for rule, value in maintained.findings(text):
        text = text.replace(value, f"[REDACTED:{rule}]")
    return text


class RedactingFilter(logging.Filter):
    """A logging filter that redacts record.msg (after formatting with record.args: set
    record.msg = redact(record.getMessage()) and record.args = None). Always returns True.
    A record marked `vetted` is made of a fixed vocabulary only (the request line: a known
    method, a URL pattern, a status, a duration; logs.RequestLogMiddleware) and is passed as
    it is: scanning it costs a request about 0.15 ms and can find nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "vetted", False) and not record.exc_info:
            return True
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            # logging's error report would print msg and args verbatim; fold them in instead.
            message = f"{record.msg} {record.args!r}"
        record.msg = redact(without_database_context(message))
        record.args = None
        if record.exc_info and not record.exc_text:
            # Exception messages carry connection strings and headers too (a failed
            # database connect quotes its URL); formatters reuse a pre-filled exc_text.
            text = logging.Formatter().formatException(record.exc_info)
            record.exc_text = redact(without_database_context(text))
        return True


# PostgreSQL's error messages quote the client's values on their DETAIL and CONTEXT lines
# ("Key (content)=(…) already exists", "Failing row contains (…)"): a note's text could reach
# the logs that way, past every secret rule. Those lines are dropped from what is logged.
_DATABASE_CONTEXT = re.compile(r"^[ \t]*(?:DETAIL|CONTEXT|Failing row contains)\b.*$", re.M)


def without_database_context(text: str) -> str:
    if "DETAIL" not in text and "CONTEXT" not in text and "Failing row" not in text:
        return text
    return _DATABASE_CONTEXT.sub("  [database detail withheld]", text)
