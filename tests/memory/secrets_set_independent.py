"""The second half of the secret-scanner corpus (docs/SECRETS.md), written apart from the rules:
its author listed credential shapes that agents and engineers paste into notes, and things that
merely look like them, from the vendors' own documented formats, before reading the scanner's
rule table or seeing any score. Same shape as secrets_set.py, except that `rule` is None
throughout (any rule that refuses counts: the labels were not written against rule names).

Every value is fake: random characters in a documented shape; vendor prefixes are split so
scanners run on this repository do not take the file for a leak.
"""

import base64


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def s(entry_id: str, text: str, secret: str) -> dict:
    return {"id": entry_id, "text": text, "rule": None, "secret": secret}


TWILIO_SK = "SK" + "3f9c1a7e5b2d48c6a0e4f7b91d2c8a6e"
PYPI = "pypi-" + "AgEIcHlwaS5vcmcCJDVmMWE4ZTQ3LTNiMmMtNDFkYS05YmY1LTA0ZTM3YzFhOGQ2NgACKlsz"
SHOPIFY = "shp" + "at_" + "4b8e1f0c9d2a7e6b5c3f1a0d9e8b7c6a"
HUGGING = "h" + "f_" + "QzXwLkPvBnMjHgFdSaTyUiOpRe" + "WqAsDfGh"
DOPPLER = "dp.st." + "prd." + "Xq7LmN2pR9sT4vW6yZ1bC3dF5gH8jK0aE2iO4uY6tQ9w"
VAULT = "hv" + "s." + "CAESIJx9Lm2Pq7RsT4uV6wX8yZ0aB2cD4eF6gH8iJ0kL2mN4GiAKHGh2cy5Qcjl" + "0bDNiRkd6a0F"
AGE = "AGE-SECRET-KEY-" + "1QQPZ7H4KX9M3ZC8L5T2V6W0R4N7J3F9E2A8D5GQS6Y4U0P7P3K9QCX5WFE"  # Bech32
KUBE_KEY = b64("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAq8vZfake0k9\n")
DO = "dop_v1_" + "7c2e9f1a4b8d3e6c0f5a9b2d7e1c4f8a3b6d9e2c5f8a1b4d7e0c3f6a9b2d5e8c"
TELEGRAM = "5829301746" + ":AAH" + "k3Zq9XvLmP2rT7wY4bN8cF1dG6hJ0sK5"
STRIPE = "sk_" + "live_" + "51Hq8ZxKp3Lm9Nv2Rt6Yw1Bc4Df7Gh0Jk3Ms5Qa8Ue2Io6Py9Tz"
STRIPE_RK = "rk_" + "live_" + "51Hq8ZxKp3Lm9Nv2Rt6Yw1Bc4Df7Gh0Jk3Ms5Qa8Ue2Io6Px"
SLACK_BOT = "xo" + "xb-" + "2841736590-4820193746521-Tq7vX2mL9pR4sW8yN3bC6dF1"
SLACK_HOOK = "https://hooks.slack.com/services/" + "T04H7Q2LP/B05K9R3MN/" + "q8Lz2Xv7Pm4Rt1Yw6Bn3Cd9F"
SENDGRID = "SG" + ".Xq7LmN2pR9sT4vW6yZ1bCw" + ".3dF5gH8jK0aE2iO4uY6tQ9wXq7LmN2pR9sT4vW6yZ1"
NPM = "np" + "m_" + "Q7vX2mL9pR4sW8yN3bC6dF1gH5jK0aE2iO4u"
GITLAB = "gl" + "pat-" + "Xq7LmN2pR9sT4vW6yZ1b"
GH_FINE = "github" + "_pat_" + "11ABCDEFG0Xq7LmN2pR9sT" + "_W6yZ1bC3dF5gH8jK0aE2iO4uY6tQ9wXq7LmN2pR9sT4vW6yZ1bC3dF5gH8j"
ANTHROPIC = "sk-" + "ant-api03-" + "Xq7LmN2pR9sT4vW6yZ1bC3dF5gH8jK0aE2iO4uY6tQ9wXq7LmN2pR9sT4vW6yZ1bC3dF5gH8jK0aE2iO4uY6tQ9wX-Abc" + "AA"
OPENAI_PROJ = "sk-" + "proj-" + "Xq7LmN2pR9sT4vW6yZ1bC3dF5gH8jK0aE2iO4uY6tQ9wT3Blbk" + "FJq7LmN2pR9sT4vW6yZ1bC3d"
GOOGLE_API = "AI" + "za" + "SyD4x9Lq2Zp7Rv3Tw8Yb1Nc6Md0Kf5Hj2Gs"
DATABRICKS = "dap" + "i" + "3f9c1a7e5b2d48c6a0e4f7b91d2c8a6e"
GRAFANA_SA = "gl" + "sa_" + "Xq7LmN2pR9sT4vW6yZ1bC3dF5gH8jK0a_3f9c1a7e"
SENTRY = "sntr" + "ys_" + "eyJpYXQiOjE3MDAwMDAwMDAuMCwidXJsIjoiaHR0cHM6Ly9zZW50cnkuaW8iLCJvcmciOiJhY21lIn0_Xq7LmN2pR9sT4vW6yZ1bC3dF5gH8jK0aE2iO4uY6tQ9w"
NEWRELIC = "NR" + "AK-" + "X7QLMN2PR9ST4VW6YZ1BC3DF5GH"
POSTMAN = "PM" + "AK-" + "65f1c0a9b2d4e7f8a1b3c5d7-" + "3f9c1a7e5b2d48c6a0e4f7b91d2c8a6e4f"
HEROKU = "HR" + "KU-" + "AAq7LmN2pR9sT4vW6yZ1bC3dF5gH8jK0aE2iO4uY6tQ9_AAA"
DOCKER_PAT = "dck" + "r_pat_" + "Xq7LmN2pR9sT4vW6yZ1bC3dF5gH"
SUPABASE = "sb" + "p_" + "3f9c1a7e5b2d48c6a0e4f7b91d2c8a6e4f7b91d2"
PLANETSCALE = "pscale" + "_tkn_" + "Xq7LmN2pR9sT4vW6yZ1bC3dF5gH8jK0aE2iO4uY6tQ9"
LINEAR = "lin" + "_api_" + "Xq7LmN2pR9sT4vW6yZ1bC3dF5gH8jK0aE2iO4uY6"
OKTA = "00" + "Xq7LmN2pR9sT4vW6yZ1bC3dF5gH8jK0aE2iO4uY6"
AZURE_CONN = (
    "DefaultEndpointsProtocol=https;AccountName=acmelogs;AccountKey="
    "Xq7LmN2pR9sT4vW6yZ1bC3dF5gH8jK0aE2iO4uY6tQ9wXq7LmN2pR9sT4vW6yZ1bC3dF5gH8jK0aE2iO4uY6tQ9w=="
    ";EndpointSuffix=core.windows.net"
)
ALIBABA = "LTAI" + "5tQ9wXq7LmN2pR9sT4vW"
MAPBOX = "sk" + ".eyJ1IjoiYWNtZSIsImEiOiJja3p4N2xtMnAwMDAwM2JwN3J0NnkxYmMzIn0" + ".Xq7LmN2pR9sT4vW6yZ1bCw"
SQUARE = "sq0" + "csp-" + "Xq7LmN2pR9sT4vW6yZ1bC3dF5gH8jK0aE2iO4uY6tQ9"
PULUMI = "pu" + "l-" + "3f9c1a7e5b2d48c6a0e4f7b91d2c8a6e4f7b91d2"
TFC = "Xq7LmN2pR9sT4v" + ".atlas" + "v1." + "Xq7LmN2pR9sT4vW6yZ1bC3dF5gH8jK0aE2iO4uY6tQ9wXq7LmN2pR9sT4vW6yZ1bC3dF5gH8jK0"
GCP_SA_KEY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7fake0k9Xq7LmN2pR"
BASIC = b64("deploy-bot:Tq7vX2mL9pR4sW8y")
PROSE_PW = "Tq7v!X2mL9#pR4"

SECRETS = [
    # --- The families an outside corpus found missing -------------------------------------
    s("twilio-api-key-sid", f"Twilio API key for the SMS worker: {TWILIO_SK}, secret in vault",
      TWILIO_SK),
    s("pypi-upload-token", f"twine upload -u __token__ -p {PYPI} dist/*", PYPI),
    s("shopify-admin-token", f"X-Shopify-Access-Token: {SHOPIFY}", SHOPIFY),
    s("hugging-face-token", f"HF_TOKEN={HUGGING} python train.py", HUGGING),
    s("doppler-service-token", f"doppler run --token {DOPPLER} -- ./start.sh", DOPPLER),
    s("vault-service-token", f"export VAULT_TOKEN={VAULT}", VAULT),
    s("age-secret-key", f"# created: 2026-11-02\n# public key: age1qxyz\n{AGE}\n", AGE),
    s("kubeconfig-client-key", f"users:\n- name: admin\n  user:\n    client-key-data: {KUBE_KEY}\n",
      KUBE_KEY),
    s("prose-admin-password", f"The admin password is {PROSE_PW} until Friday's rotation.",
      PROSE_PW),
    s("digitalocean-token", f"doctl auth init -t {DO}", DO),
    s("telegram-bot-token", f"Alerts go to the bot {TELEGRAM} in the on-call group.", TELEGRAM),
    # --- Payment, messaging and mail --------------------------------------------------------
    s("stripe-secret-key", f"STRIPE_SECRET_KEY={STRIPE}", STRIPE),
    s("stripe-restricted-key", f"the reporting job uses {STRIPE_RK}", STRIPE_RK),
    s("slack-bot-token", f"slack token for the deploy bot: {SLACK_BOT}", SLACK_BOT),
    s("slack-webhook", f"post build results to {SLACK_HOOK}", SLACK_HOOK),
    s("sendgrid-key", f"SENDGRID_API_KEY='{SENDGRID}'", SENDGRID),
    s("square-secret", f"square oauth secret {SQUARE}", SQUARE),
    # --- Code hosting, packages, CI -----------------------------------------------------------
    s("npm-token", f"//registry.npmjs.org/:_authToken={NPM}", NPM),
    s("gitlab-pat", f"git clone https://oauth2:{GITLAB}@gitlab.com/acme/app.git", GITLAB),
    s("github-fine-grained-pat", f"GH_TOKEN={GH_FINE}", GH_FINE),
    s("docker-hub-pat", f"docker login -u acmeci -p {DOCKER_PAT}", DOCKER_PAT),
    s("terraform-cloud-token", f'credentials "app.terraform.io" {{ token = "{TFC}" }}', TFC),
    s("pulumi-token", f"PULUMI_ACCESS_TOKEN={PULUMI}", PULUMI),
    # --- Model and data platforms -------------------------------------------------------------
    s("anthropic-key", f"ANTHROPIC_API_KEY={ANTHROPIC}", ANTHROPIC),
    s("openai-project-key", f"client = OpenAI(api_key=\"{OPENAI_PROJ}\")", OPENAI_PROJ),
    s("databricks-token", f"databricks configure --token  # pasted {DATABRICKS}", DATABRICKS),
    s("supabase-token", f"supabase login --token {SUPABASE}", SUPABASE),
    s("planetscale-token", f"PLANETSCALE_SERVICE_TOKEN={PLANETSCALE}", PLANETSCALE),
    # --- Observability and tooling ------------------------------------------------------------
    s("grafana-service-account", f"Authorization: Bearer {GRAFANA_SA}", GRAFANA_SA),
    s("sentry-org-token", f"SENTRY_AUTH_TOKEN={SENTRY}", SENTRY),
    s("newrelic-user-key", f"NEW_RELIC_API_KEY={NEWRELIC}", NEWRELIC),
    s("postman-key", f"postman api key {POSTMAN}", POSTMAN),
    s("linear-key", f"LINEAR_API_KEY={LINEAR}", LINEAR),
    s("heroku-token", f"HEROKU_API_KEY={HEROKU}", HEROKU),
    s("okta-token", f"Authorization: SSWS {OKTA}", OKTA),
    # --- Clouds ----------------------------------------------------------------------------
    s("google-api-key", f"maps key {GOOGLE_API} (restricted to our referrer)", GOOGLE_API),
    s("azure-storage-connection", f"AZURE_STORAGE_CONNECTION_STRING=\"{AZURE_CONN}\"",
      AZURE_CONN.split("AccountKey=")[1].split(";")[0]),
    s("alibaba-access-key", f"aliyun configure --access-key-id {ALIBABA}", ALIBABA),
    s("gcp-service-account-json", '{"type": "service_account", "project_id": "acme-prod", '
      f'"private_key": "-----BEGIN PRIVATE KEY-----\\n{GCP_SA_KEY}\\n-----END PRIVATE KEY-----\\n"}}',
      GCP_SA_KEY),
    s("mapbox-secret-token", f"MAPBOX_SECRET={MAPBOX}", MAPBOX),
    # --- Passwords as people write them --------------------------------------------------------
    s("prose-db-password", "db login is app_rw / Zk4!qP9wLx2v (prod, read-write)", "Zk4!qP9wLx2v"),
    s("prose-password-for", "password for the grafana admin: Lm8#Tq2vXw9p", "Lm8#Tq2vXw9p"),
    s("netrc-password", "machine api.acme.dev\n  login deploy\n  password Hv7$kQ2mZp9w\n",
      "Hv7$kQ2mZp9w"),
    s("redis-url-password", "REDIS_URL=redis://:Qw8vLm2pXk9t@cache.internal:6379/0",
      "Qw8vLm2pXk9t"),
    s("basic-auth-header", f"curl -H 'Authorization: Basic {BASIC}' https://ci.acme.dev/api",
      BASIC),
    s("mysql-password-flag", "mysqldump --user=backup --password='Rt5#vX9mLq2w' shop",
      "Rt5#vX9mLq2w"),
    s("env-secret-key", "DJANGO_SECRET_KEY=k9#v2xq!7lm4p@r8t1w6y3b0c5d-f9g2h7j4k1m8n",
      "k9#v2xq!7lm4p@r8t1w6y3b0c5d-f9g2h7j4k1m8n"),
    s("yaml-client-secret", "oauth:\n  client_id: acme-web\n  client_secret: Xq7LmN2pR9sT4vW6yZ1bC3dF\n",
      "Xq7LmN2pR9sT4vW6yZ1bC3dF"),
    s("json-api-key", '{"service": "geocoder", "apiKey": "Zq8Xv2Lm7Pk4Rt9Wy1Bn6Cd3"}',
      "Zq8Xv2Lm7Pk4Rt9Wy1Bn6Cd3"),
]  # fmt: skip

HARMLESS = [
    # --- Talking about credentials without one ---------------------------------------------
    {"id": "i-prefix-prose", "text": "GitHub classic tokens start with ghp_, fine-grained ones with github_pat_."},
    {"id": "i-aws-prefix-prose", "text": "AWS access key ids begin with AKIA (long-term) or ASIA (temporary)."},
    {"id": "i-rotation-prose", "text": "The admin password was rotated on Friday; ask #infra for the new one."},
    {"id": "i-reset-prose", "text": "Password reset links expire after 24 hours and work once."},
    {"id": "i-vault-path", "text": "The Stripe key lives at secret/data/payments/stripe in Vault."},
    {"id": "i-env-ref", "text": "Set STRIPE_SECRET_KEY from the environment; never commit it."},
    {"id": "i-k8s-ref", "text": "env:\n- name: SENTRY_AUTH_TOKEN\n  valueFrom:\n    secretKeyRef: {name: sentry, key: token}"},
    {"id": "i-kube-redacted", "text": "users:\n- name: admin\n  user:\n    client-key-data: REDACTED\n"},
    {"id": "i-pypi-prose", "text": "PyPI API tokens start with pypi- and are scoped to one project."},
    {"id": "i-age-public", "text": "Encrypt the backup to age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"},
    {"id": "i-hf-function", "text": "Use hf_hub_download(repo_id='acme/model') instead of requests."},
    {"id": "i-doppler-prose", "text": "Doppler service tokens begin with dp.st. followed by the config name."},
    {"id": "i-telegram-id", "text": "The alert bot's chat id is -1001234567890."},
    {"id": "i-placeholder-stripe", "text": "STRIPE_SECRET_KEY=sk_live_xxxxxxxxxxxxxxxxxxxxxxxx"},
    {"id": "i-placeholder-angle", "text": "export VAULT_TOKEN=<your token>"},
    {"id": "i-placeholder-dollar", "text": "twine upload -u __token__ -p $PYPI_TOKEN dist/*"},
    {"id": "i-stripe-publishable", "text": "The checkout page loads pk_test_TYooMQauvdEDq54NiTphI7jx."},
    # --- Hashes, ids and digests ------------------------------------------------------------
    {"id": "i-git-sha", "text": "Fixed in 9fceb02d0ae598e95dc970b74767f19372d61af8; deploy that."},
    {"id": "i-sha256", "text": "sha256 of the release tarball: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
    {"id": "i-image-digest", "text": "pin the image to acme/api@sha256:4d5f8c2e9b1a7f3e6d0c8b5a2f9e1d7c4b8a3f6e0d9c2b5a8f1e4d7c0b3a6f9e2"},
    {"id": "i-npm-integrity", "text": "integrity sha512-Q7vX2mL9pR4sW8yN3bC6dF1gH5jK0aE2iO4uY6tQ9wXq7LmN2pR9sT4vW6yZ1bC3dF5gH8jK0aE2iO4uY6tQ9w=="},
    {"id": "i-uuid", "text": "Tenant 3f2504e0-4f89-11d3-9a0c-0305e82c3301 is the staging tenant."},
    {"id": "i-ulid", "text": "See mem_01jdq7x4v2kz9m3p8r5t6w0y1b and run_01jdq7x4v2kz9m3p8r5t6w0y1c."},
    {"id": "i-stripe-ids", "text": "Refund ch_3OqLmN2pR9sT4vW6 and customer cus_PqRsTuVwXyZ123."},
    {"id": "i-request-id", "text": "X-Amzn-RequestId: 7a62c49f-347e-4fc4-9331-6e8eEXAMPLE"},
    {"id": "i-etag", "text": "ETag: \"33a64df551425fcc55e4d42a148795d9f25f89d4\""},
    # --- Public material that looks like keys ------------------------------------------------
    {"id": "i-ssh-public", "text": "Add ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ci@acme to authorized_keys."},
    {"id": "i-certificate", "text": "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ\n-----END CERTIFICATE-----"},
    {"id": "i-public-key", "text": "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEfakepublickeyonly\n-----END PUBLIC KEY-----"},
    {"id": "i-jwt-header-only", "text": "JWTs start with eyJhbGciOi because the header is base64 JSON."},
    # --- URLs, config and code without values ------------------------------------------------
    {"id": "i-url-no-password", "text": "DATABASE_URL=postgres://app@db.internal:5432/app?sslmode=require"},
    {"id": "i-url-user-only", "text": "git clone https://deploy@github.com/acme/app.git"},
    {"id": "i-slack-channel-url", "text": "Results are posted in https://acme.slack.com/archives/C04H7Q2LP"},
    {"id": "i-config-keys", "text": "password_min_length: 12\npassword_max_age_days: 90\ntoken_ttl_seconds: 3600"},
    {"id": "i-python-kwarg", "text": "connect(host=host, user=user, password=password, dbname=name)"},
    {"id": "i-css-colors", "text": "Palette: #1f2937 #3b82f6 #10b981 #f59e0b #ef4444 #8b5cf6."},
    {"id": "i-version-string", "text": "Upgrade to 2.0.0-rc.4+build.20261026.abcdef0 before Monday."},
    {"id": "i-base64-json", "text": "The cursor is eyJvZmZzZXQiOiA1MCwgImxpbWl0IjogMjV9 (offset 50)."},
    {"id": "i-long-word", "text": "Antidisestablishmentarianism is not a config key; internationalization is."},
    {"id": "i-test-card", "text": "Use the test card 4242 4242 4242 4242 with any future date."},
    {"id": "i-cron", "text": "*/5 * * * * /srv/app/.venv/bin/python manage.py memory_run_due_routines"},
    {"id": "i-aws-arn", "text": "Role arn:aws:iam::123456789012:role/deploy assumes for 1 hour."},
    {"id": "i-token-budget", "text": "The prompt used 12,000 tokens; the context window is 200k tokens."},
    {"id": "i-password-policy", "text": "Passwords need 12 characters, one digit and one symbol like !#$."},
    {"id": "i-sk-word", "text": "A risk-based review (sk-level triage) happens before each release."},
]  # fmt: skip
