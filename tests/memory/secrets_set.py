"""The labelled secret-scanner corpus (docs/SECRETS.md): secret shapes the scanner must refuse,
each with the rule expected to fire first, and harmless look-alikes it must let through.

Rules the labels follow:

- every value is fake: random characters, or words such as "Fake" inside an otherwise
  shape-valid value; vendor prefixes are split ("gh" + "p_…") so secret scanners run on the
  repository do not mistake the corpus for a leak;
- a SECRETS entry names the rule `find_secret()` must return (rules are tried in order, so a
  text matching two rules is labelled with the earlier one) and a substring, `secret`, that must
  not survive `redact()`;
- a HARMLESS entry is something an agent plausibly writes in a note: prose about passwords and
  tokens, hashes, ids, references to secrets kept elsewhere, documentation placeholders. The
  comment above each group says why it must pass.

Plain data: `memory_secrets_eval --corpus PATH` loads this file with runpy.
"""

import base64


def pem(kind: str, body: str) -> str:
    label = f"{kind} PRIVATE KEY".strip()
    return "-----BEGIN " + label + "-----\n" + body + "\n-----END " + label + "-----\n"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiAiYWd0X2Zha2UiLCAiZXhwIjogMTk5OTk5OTk5OX0"
    ".w1zW9-ohP46PbmT1TOkzfR1wKbPXTXx8TTx4XUMGmTt"
)
AZURE_KEY = (
    "y27dFanUrOSE62chn4xdeJg1Kza5KxxGWfvmaQtKnP/VSGVBrYSuIb9OZiFZ3HLKv797TPNbpjava1bMZwIMlv=="
)
PEM_BODY = "MIIEpAIBAAKCAQEA3Tz2mr7SuFv9Kx1yq0m6hK4pLw8XnR2cVb5Jd7eQf1gHsYtU"

# Signed-URL parts: an AWS SigV4 signature is 64 hex digits, a GCS RSA signature 512.
S3_SIGNATURE = "640a3424334df6e9b6799e0487c171e5c797471a59706e2957204cf81c651fd2"
GCS_HMAC_SIGNATURE = "c19d30b2d48bb82aafd256974a867bd6af7f3ee8922721ad7ec992ecb8f30786"
GCS_RSA_SIGNATURE = (
    "3794b4ff1a0cc6bee2a4a917e83d2ec397895c9a53cda8bd662a59501af53a02a285a1d8ef4f39e91e3819de48e5"
    "cde4c41a0b2f5db537d9fc2d77ea011821782f4f76aec19a1c65076ce7d914e931f093a92fd85d8cf8ac433502f8"
    "bdf75059ed9106ae1ef6a5a1fc63a59f0f809ad2fb9e09a0d74ddc327ad512cacb13ce1ff699408f361d4735dbae"
    "3e0447f2ef56dcb571b3c307eb2f88b8d318db9e6926795a68ba2005ad40892f130181228f6ef5587519eef2d740"
    "c578690ed0204a792ab76876030bf5571331e7a2f15690a52d156f23b2996e9bcdd6ccd08ba0caefb89ca8245a2e"
    "4a5fda5131fa7394edd242c427bafa56e9c27c5ca91089671d31"
)
AZURE_SAS_SIG = "ItUv%2BeQQ0Z8GnwXGIrz8tLbXUQs88s%2FiEym5fUYXfN2"
DOCKER_AUTH = b64("ci-bot:Fake-Registry-Pw-1")
UUIDS = (
    "25de18f2-da13-4991-93de-5d4f0aec8ab7",
    "67aad0a1-a53b-4648-a29a-a7fc4b9d3c5b",
    "c18be4ca-7fc5-463b-8cef-a57120930af9",
)
DISCORD_TOKEN = "MTA5ODc2NTQzMjEwOTg3NjU0Mw" + ".Ci872B" + ".acUlITVCKPSNf-mzlnoteUvueDQnCbpOTOoDUm"

SECRETS = [
    # --- The original corpus: private keys, URL passwords, vendor tokens, assignments ---------
    {
        "id": "pem-rsa",
        "text": pem("RSA", PEM_BODY),
        "rule": "private_key",
        "secret": PEM_BODY,
    },
    {
        "id": "pem-pkcs8",
        "text": pem("", PEM_BODY),
        "rule": "private_key",
        "secret": PEM_BODY,
    },
    {
        "id": "pem-ec",
        "text": pem("EC", PEM_BODY),
        "rule": "private_key",
        "secret": PEM_BODY,
    },
    {
        "id": "pem-openssh",
        "text": "id_ed25519:\n" + pem("OPENSSH", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"),
        "rule": "private_key",
        "secret": "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
    },
    {
        "id": "pgp-block",
        "text": "-----BEGIN PGP " + "PRIVATE KEY BLOCK-----\n\nlQOYBGZfakeBCAC9xQ2mZ7rT\n=Xk2p\n"
        "-----END PGP PRIVATE KEY BLOCK-----",
        "rule": "private_key",
        "secret": "lQOYBGZfakeBCAC9xQ2mZ7rT",
    },
    {
        "id": "pem-json-escaped",
        "text": '{"private_key": "-----BEGIN ' + "PRIVATE KEY-----\\n" + PEM_BODY + "\\n-----END "
        'PRIVATE KEY-----\\n"}',
        "rule": "private_key",
        "secret": PEM_BODY,
    },
    {
        "id": "pem-truncated",
        "text": "-----BEGIN ENCRYPTED " + "PRIVATE KEY-----\n" + PEM_BODY + "\n(truncated)",
        "rule": "private_key",
        "secret": PEM_BODY,
    },
    {
        "id": "url-postgres",
        "text": "DATABASE_URL=postgres://app:Zq8vLm2Rt7Kp@db.internal:5432/app",
        "rule": "url_credentials",
        "secret": "Zq8vLm2Rt7Kp",
    },
    {
        "id": "url-https",
        "text": "clone https://deploy:T7vkP2q-w9Xz@git.example.com/org/repo.git",
        "rule": "url_credentials",
        "secret": "T7vkP2q-w9Xz",
    },
    {
        "id": "url-redis",
        "text": "redis://:n8Vq2LmP4x@cache:6379/0",
        "rule": "url_credentials",
        "secret": "n8Vq2LmP4x",
    },
    {
        "id": "url-mongodb-srv",
        "text": "mongodb+srv://svc:Pq7mN2vX9e@cluster0.example.net/notes?retryWrites=true",
        "rule": "url_credentials",
        "secret": "Pq7mN2vX9e",
    },
    {
        "id": "url-amqp",
        "text": "broker: amqp://worker:rabbit-7Hk2@mq.example.com:5672/",
        "rule": "url_credentials",
        "secret": "rabbit-7Hk2",
    },
    {
        "id": "aws-akia",
        "text": "backup user key id " + "AKIA" + "VQJXXVBOTHD0WTFL" + " (rotated monthly)",
        "rule": "aws_access_key",
        "secret": "VQJXXVBOTHD0WTFL",
    },
    {
        "id": "aws-asia",
        "text": "AWS_ACCESS_KEY_ID=" + "ASIA" + "Q3M7ZK2XW9PLT4RB",
        "rule": "aws_access_key",
        "secret": "Q3M7ZK2XW9PLT4RB",
    },
    {
        "id": "aws-secret",
        "text": "aws_secret_access_key = pdzPaEMM1ZA7V0FhHVJWDBt2hWdQZUm14QhoxhLP",
        "rule": "aws_secret_key",
        "secret": "pdzPaEMM1ZA7V0FhHVJWDBt2hWdQZUm14QhoxhLP",
    },
    {
        "id": "gcp-private-key-id",
        "text": '{"type": "service_account", "project_id": "demo-1234", '
        '"private_key_id": "60a077bbd142880e8427abeec12975fd55911ea2"}',
        "rule": "gcp_service_account",
        "secret": "60a077bbd142880e8427abeec12975fd55911ea2",
    },
    {
        "id": "gcp-service-account",
        "text": '{"type": "service_account", "project_id": "demo-1234", "private_key": "..."}',
        "rule": "gcp_service_account",
        "secret": '"type": "service_account"',
    },
    {
        "id": "google-api-key",
        "text": "maps key " + "AI" + "zaWV1mKaUyvBPs0jSO2Jkf08MMF1ulMMCw3XV",
        "rule": "google_api_key",
        "secret": "WV1mKaUyvBPs0jSO2Jkf08MMF1ulMMCw3XV",
    },
    {
        "id": "azure-account-key",
        "text": "DefaultEndpointsProtocol=https;AccountName=demo;AccountKey="
        + AZURE_KEY
        + ";EndpointSuffix=core.windows.net",
        "rule": "azure_storage_key",
        "secret": AZURE_KEY,
    },
    {
        "id": "github-ghp",
        "text": "GH_TOKEN " + "gh" + "p_bSh2Cde2wioVMEuUYMjPeFXsRgZzCYTHY2Iv",
        "rule": "github_token",
        "secret": "bSh2Cde2wioVMEuUYMjPeFXsRgZzCYTHY2Iv",
    },
    {
        "id": "github-gho",
        "text": "oauth " + "gh" + "o_GYF0eYF2ExFJgKLDL36awmUDt8QvwTH6Iuj2",
        "rule": "github_token",
        "secret": "GYF0eYF2ExFJgKLDL36awmUDt8QvwTH6Iuj2",
    },
    {
        "id": "github-fine-grained-pat",
        "text": "github" + "_pat_OkDCJ23VmCwykTp4EilsS2_aQnjUHc6LZQ9SMDcEVV8bOhUVXoqmaQzE4ftUvXQ",
        "rule": "github_token",
        "secret": "OkDCJ23VmCwykTp4EilsS2_aQnjUHc6LZQ9SMDcEVV8bOhUVXoqmaQzE4ftUvXQ",
    },
    {
        "id": "gitlab-pat",
        "text": "export GITLAB_TOKEN=" + "gl" + "pat-e57l9JuO4iIhOvqiZnCx",
        "rule": "gitlab_token",
        "secret": "e57l9JuO4iIhOvqiZnCx",
    },
    {
        "id": "slack-bot",
        "text": "bot token " + "xo" + "xb-180783752346-3202687496510-dCL8Sby90WIJSbUGWBOWWcua",
        "rule": "slack_token",
        "secret": "dCL8Sby90WIJSbUGWBOWWcua",
    },
    {
        "id": "slack-user",
        "text": "xo" + "xp-2981734562-7712365498-9081726354-5c1e0f3a9b7d2e4f6a8c0b1d3e5f7a9c",
        "rule": "slack_token",
        "secret": "5c1e0f3a9b7d2e4f6a8c0b1d3e5f7a9c",
    },
    {
        "id": "slack-webhook",
        "text": "alerts go to https://hooks.slack.com/services/"
        + "T0ZBB5A2ODU/BPCIVDM3RDZ/14cKuuBNf0gmUBUhWRQdIAUD",
        "rule": "slack_webhook",
        "secret": "14cKuuBNf0gmUBUhWRQdIAUD",
    },
    {
        "id": "stripe-sk-live",
        "text": "STRIPE_KEY " + "sk" + "_live_FbxtBetshRQNG3dhi4wVnX55",
        "rule": "stripe_key",
        "secret": "FbxtBetshRQNG3dhi4wVnX55",
    },
    {
        "id": "stripe-rk-live",
        "text": "rk" + "_live_8GkvxThvA0EhexWQ3czyrEvm",
        "rule": "stripe_key",
        "secret": "8GkvxThvA0EhexWQ3czyrEvm",
    },
    {
        "id": "stripe-sk-test",
        "text": "test mode: " + "sk" + "_test_51Hx9QmFakeKey0aBcDeFgHiJ",
        "rule": "stripe_key",
        "secret": "51Hx9QmFakeKey0aBcDeFgHiJ",
    },
    {
        "id": "anthropic",
        "text": "ANTHROPIC_API_KEY "
        + "sk-"
        + "ant-api03-wp-vaQcT7xl2cwC6dT0ctPVnaawqrczLJWImKMG4hEbuU",
        "rule": "anthropic_key",
        "secret": "wp-vaQcT7xl2cwC6dT0ctPVnaawqrczLJWImKMG4hEbuU",
    },
    {
        "id": "openai-legacy",
        "text": "old key " + "sk-" + "kXbI8P0GwAESV5nkthBGJd8xncwjxTZVcUOpdxfWEIRH3KU3",
        "rule": "openai_key",
        "secret": "kXbI8P0GwAESV5nkthBGJd8xncwjxTZVcUOpdxfWEIRH3KU3",
    },
    {
        "id": "openai-project",
        "text": "sk-"
        + "proj-oPK_HJN45P-ED75cNRqsKz5b70CO8W7RQHy2Yp_ptzsJqLOJqu3g9DYpQaxEN_cNljiRk",
        "rule": "openai_key",
        "secret": "oPK_HJN45P-ED75cNRqsKz5b70CO8W7RQHy2Yp_ptzsJqLOJqu3g9DYpQaxEN_cNljiRk",
    },
    {
        "id": "openai-style-hex",
        "text": "compatible endpoint, key sk-" + "14e287ba054769ba41cbb44f07539038",
        "rule": "openai_key",
        "secret": "14e287ba054769ba41cbb44f07539038",
    },
    {
        "id": "npm",
        "text": "//registry.npmjs.org/:_authToken="
        + "np"
        + "m_LpaKoJceXBH42IkQFU960mNhJuAPXOEGvgUs",
        "rule": "npm_token",
        "secret": "LpaKoJceXBH42IkQFU960mNhJuAPXOEGvgUs",
    },
    {
        "id": "memory-portal-token",
        "text": "MEMORY_PORTAL_TOKEN="
        + "mp"
        + "_10e6f58de9b9_3xzfMg5lJYj_loHI3Yhc1OxT-8QY4-3BMDogiSTRIiP",
        "rule": "memory_portal_token",
        "secret": "3xzfMg5lJYj_loHI3Yhc1OxT-8QY4-3BMDogiSTRIiP",
    },
    {
        "id": "jwt",
        "text": "session cookie " + JWT,
        "rule": "jwt",
        "secret": JWT.rsplit(".", 1)[1],
    },
    {
        "id": "bearer-header",
        "text": "Authorization: Bearer 9LJm7R04ZhbGSdGWoZ6axl7KBGgMVGOYn7B3.5SA",
        "rule": "bearer_header",
        "secret": "9LJm7R04ZhbGSdGWoZ6axl7KBGgMVGOYn7B3.5SA",
    },
    {
        "id": "basic-header",
        "text": 'curl -H "Authorization: Basic ZGVwbG95Ok4wdC1hLXJlYWwtcHch" https://ci.example.com',
        "rule": "bearer_header",
        "secret": "ZGVwbG95Ok4wdC1hLXJlYWwtcHch",
    },
    {
        "id": "token-header",
        "text": "headers = {'Authorization': 'Token 4c7b2a9e0d1f3e5a'}",
        "rule": "bearer_header",
        "secret": "4c7b2a9e0d1f3e5a",
    },
    {
        "id": "bearer-bare",
        "text": "send it as Bearer Q2x9vR7mK4pL8nZ3wT6yB1cF5",
        "rule": "bearer_header",
        "secret": "Q2x9vR7mK4pL8nZ3wT6yB1cF5",
    },
    {
        "id": "assign-password",
        "text": "password=hunter22x",
        "rule": "credential_assignment",
        "secret": "hunter22x",
    },
    {
        "id": "assign-env-var",
        "text": "DB_PASSWORD=Tr0ub4dor&3",
        "rule": "credential_assignment",
        "secret": "Tr0ub4dor&3",
    },
    {
        "id": "assign-json",
        "text": '{"api_key": "a8f3k2m9q7w1z5x4"}',
        "rule": "credential_assignment",
        "secret": "a8f3k2m9q7w1z5x4",
    },
    {
        "id": "assign-yaml",
        "text": "client_secret: 'Xk29-vq7LmN3'",
        "rule": "credential_assignment",
        "secret": "Xk29-vq7LmN3",
    },
    {
        "id": "assign-header",
        "text": "x-api-key: 7f3a9c2e1b",
        "rule": "credential_assignment",
        "secret": "7f3a9c2e1b",
    },
    {
        "id": "assign-django-secret-key",
        "text": 'SECRET_KEY = "django-insecure-8k2mx9q0z7w"',
        "rule": "credential_assignment",
        "secret": "django-insecure-8k2mx9q0z7w",
    },
    {
        "id": "assign-cli-flag",
        "text": "./manage.py migrate --password=S3cure!Pass",
        "rule": "credential_assignment",
        "secret": "S3cure!Pass",
    },
    {
        "id": "assign-django-settings",
        "text": "DATABASES = {'default': {'USER': 'app', 'PASSWORD': 'letmein42'}}",
        "rule": "credential_assignment",
        "secret": "letmein42",
    },
    {
        "id": "assign-bare-word",
        "text": "passwd = correcthorse",
        "rule": "credential_assignment",
        "secret": "correcthorse",
    },
    {
        "id": "assign-php",
        "text": '$password = "p@ssW0rd2024";',
        "rule": "credential_assignment",
        "secret": "p@ssW0rd2024",
    },
    {
        "id": "assign-ruby",
        "text": "config.password => 'Zebra-Fish-42'",
        "rule": "credential_assignment",
        "secret": "Zebra-Fish-42",
    },
    {
        "id": "assign-passphrase",
        "text": '"password": "correct horse battery staple"',
        "rule": "credential_assignment",
        "secret": "correct horse battery staple",
    },
    {
        "id": "assign-query-string",
        "text": "GET https://api.example.com/v1/items?access_token=8c1d7e2f9a3b&page=2",
        "rule": "credential_assignment",
        "secret": "8c1d7e2f9a3b",
    },
    {
        "id": "assign-numeric",
        "text": "PIN code: pwd: 481516",
        "rule": "credential_assignment",
        "secret": "481516",
    },
    # --- Cloud storage signed URLs: whoever holds the URL holds the object until it expires ---
    {
        "id": "s3-presigned-v4",
        "text": "export ready: https://notes-exports.s3.eu-west-1.amazonaws.com/2024/06/export.jsonl"
        "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=" + "AK" + "IAFAKE7TESTQ2Z4KEY"
        "%2F20240611%2Feu-west-1%2Fs3%2Faws4_request&X-Amz-Date=20240611T093000Z"
        "&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature=" + S3_SIGNATURE,
        "rule": "aws_presigned_url",
        "secret": S3_SIGNATURE,
    },
    {
        "id": "s3-presigned-signature-only",
        "text": "download link (1 h): https://reports.s3.amazonaws.com/q2.pdf?X-Amz-Algorithm="
        "AWS4-HMAC-SHA256&X-Amz-Date=20240611T093000Z&X-Amz-Expires=3600"
        "&X-Amz-SignedHeaders=host&X-Amz-Signature=" + S3_SIGNATURE,
        "rule": "aws_presigned_url",
        "secret": S3_SIGNATURE,
    },
    {
        "id": "s3-presigned-credential",
        "text": "the link had X-Amz-Credential=" + "AS" + "IAQ3M7ZK2XW9FAKE01"
        "%2F20240611%2Fus-east-1%2Fs3%2Faws4_request in it",
        "rule": "aws_presigned_url",
        "secret": "Q3M7ZK2XW9FAKE01",
    },
    {
        "id": "s3-presigned-session-token",
        "text": "https://bucket.s3.amazonaws.com/a.csv?X-Amz-Date=20240611T093000Z"
        "&X-Amz-Security-Token=IQoJb3JpZ2luX2VjEFake%2FGrNOy5DORDgVRxSDNe5xX9MF"
        "%2BeX4od4AuyGljwXOaqtGplBwpAxE4bffMoI2%3D&X-Amz-Expires=300",
        "rule": "aws_presigned_url",
        "secret": "GrNOy5DORDgVRxSDNe5xX9MF",
    },
    {
        "id": "s3-presigned-v2",
        "text": "https://bucket.s3.amazonaws.com/backup.zip?AWSAccessKeyId=" + "AK" + "IA"
        "FAKEV2QUERYKEY01&Expires=1718100000&Signature=MywVvmBpL24jT%2FRjeGY3tI64nmb%3D",
        "rule": "signed_url",
        "secret": "MywVvmBpL24jT%2FRjeGY3tI64nmb",
    },
    {
        "id": "cloudfront-signed",
        "text": "video: https://d111111abcdef8.cloudfront.net/intro.mp4?Expires=1718100000"
        "&Signature=T-_Y7vrqPsscBAOfcrCrFau7S8xuB5LI4ko-1IA_asJ-fcisPQl8K~RseSi4imXk9OxkZ8Vvme3"
        "CvgifcR2fyFE0NH79KsrPFsno6U-d4YHu_hRBT-LsvVlZ&Key-Pair-Id=K2JCJMDEHXQW5F",
        "rule": "signed_url",
        "secret": "T-_Y7vrqPsscBAOfcrCrFau7S8xuB5LI4ko",
    },
    {
        "id": "gcs-signed-v4-rsa",
        "text": "https://storage.googleapis.com/notes-bucket/export.csv?X-Goog-Algorithm="
        "GOOG4-RSA-SHA256&X-Goog-Credential=exporter%40demo-1234.iam.gserviceaccount.com"
        "%2F20240611%2Fauto%2Fstorage%2Fgoog4_request&X-Goog-Date=20240611T093000Z"
        "&X-Goog-Expires=900&X-Goog-SignedHeaders=host&X-Goog-Signature=" + GCS_RSA_SIGNATURE,
        "rule": "gcs_signed_url",
        "secret": GCS_RSA_SIGNATURE,
    },
    {
        "id": "gcs-signed-v4-hmac",
        "text": "https://storage.googleapis.com/b/o.json?X-Goog-Algorithm=GOOG4-HMAC-SHA256"
        "&X-Goog-Date=20240611T093000Z&X-Goog-Expires=600&X-Goog-Signature=" + GCS_HMAC_SIGNATURE,
        "rule": "gcs_signed_url",
        "secret": GCS_HMAC_SIGNATURE,
    },
    {
        "id": "gcs-signed-v2",
        "text": "https://storage.googleapis.com/bucket/obj.tar?GoogleAccessId=svc%40demo-1234.iam."
        "gserviceaccount.com&Expires=1718100000&Signature=ORxyRu%2Bs4mHkLzGl9VzxJPVB%2BJwAip3n"
        "lehvhvTk6mA%3D",
        "rule": "signed_url",
        "secret": "ORxyRu%2Bs4mHkLzGl9VzxJPVB",
    },
    {
        "id": "azure-sas-blob-url",
        "text": "https://demo.blob.core.windows.net/exports/notes.jsonl?sp=r&st=2024-06-11T09:30:00Z"
        "&se=2024-06-11T17:30:00Z&spr=https&sv=2022-11-02&sr=b&sig=" + AZURE_SAS_SIG + "%3D",
        "rule": "azure_sas_token",
        "secret": AZURE_SAS_SIG,
    },
    {
        "id": "azure-sas-connection-string",
        "text": "BlobEndpoint=https://demo.blob.core.windows.net/;SharedAccessSignature=sv=2022-11-02"
        "&ss=b&srt=sco&sp=rl&se=2025-01-01T00:00:00Z&spr=https"
        "&sig=ORxyRu+s4mHkLzGl9VzxJPVB+JwAip3nlehvhvTk6mA=",
        "rule": "azure_sas_token",
        "secret": "ORxyRu+s4mHkLzGl9VzxJPVB+JwAip3nlehvhvTk6mA",
    },
    {
        "id": "azure-sas-token-only",
        "text": "SAS for the backup container: ?sv=2021-08-06&ss=b&srt=o&sp=w"
        "&se=2024-12-31T23:59:59Z&sig=" + AZURE_SAS_SIG + "%3D",
        "rule": "azure_sas_token",
        "secret": AZURE_SAS_SIG,
    },
    # --- E-mail provider API keys --------------------------------------------------------------
    {
        "id": "sendgrid-env",
        "text": "SENDGRID_API_KEY=" + "SG" + ".qXkHZu3D8iRQ-6hn9XYZE5"
        ".dkREL--qwiRdTUXzpwydIU5MDTTbIMhTntDxHiSi6N_",
        "rule": "sendgrid_key",
        "secret": "dkREL--qwiRdTUXzpwydIU5MDTTbIMhTntDxHiSi6N_",
    },
    {
        "id": "sendgrid-code",
        "text": 'sg = SendGridAPIClient("' + "SG" + ".FakeKeyForTestsOnly012"
        '.Xq7vLm2Rt7KpZq8vLm2Rt7KpN0tARealSendGridKey")',
        "rule": "sendgrid_key",
        "secret": "Xq7vLm2Rt7KpZq8vLm2Rt7KpN0tARealSendGridKey",
    },
    {
        "id": "mailgun-legacy-key",
        "text": "curl -s --user 'api:" + "key" + "-tfu1mkvwcpxhoo0l74cm5gal99oz2xro' "
        "https://api.mailgun.net/v3/mg.example.com/messages",
        "rule": "mailgun_key",
        "secret": "tfu1mkvwcpxhoo0l74cm5gal99oz2xro",
    },
    {
        "id": "mailgun-key",
        "text": "MAILGUN_API_KEY=be250055025b6e3c994744e236a0419f" + "-f546668f-3f20741f",
        "rule": "mailgun_key",
        "secret": "be250055025b6e3c994744e236a0419f",
    },
    {
        "id": "mailchimp-key",
        "text": "mailchimp marketing key 6e4407687141366f8f8314615bdd66e6"
        + "-us12 (audience sync)",
        "rule": "mailchimp_key",
        "secret": "6e4407687141366f8f8314615bdd66e6",
    },
    {
        "id": "mailchimp-json",
        "text": '{"apikey": "1750088ab8507248bc62c4b72153b4e6' + '-us21", "list": "weekly"}',
        "rule": "mailchimp_key",
        "secret": "1750088ab8507248bc62c4b72153b4e6",
    },
    {
        "id": "mandrill-key",
        "text": "transactional mail goes through Mandrill, key " + "md" + "-FakeMandr1llKey4Tests0",
        "rule": "mailchimp_key",
        "secret": "FakeMandr1llKey4Tests0",
    },
    {
        "id": "postmark-header",
        "text": "X-Postmark-Server-Token: " + UUIDS[0],
        "rule": "postmark_token",
        "secret": UUIDS[0],
    },
    {
        "id": "postmark-env",
        "text": "POSTMARK_SERVER_TOKEN=" + UUIDS[1],
        "rule": "postmark_token",
        "secret": UUIDS[1],
    },
    {
        "id": "postmark-sdk",
        "text": 'const client = new postmark.ServerClient("' + UUIDS[2] + '");',
        "rule": "postmark_token",
        "secret": UUIDS[2],
    },
    {
        "id": "brevo-key",
        "text": "BREVO_API_KEY="
        + "xkeysib"
        + "-f5f0e00f7e48e1f84b4b44730a1cce69ca61c436b82f37c33fe346e7ac7433ec-Dqi67KK1qCmzhEvY",
        "rule": "brevo_key",
        "secret": "f5f0e00f7e48e1f84b4b44730a1cce69ca61c436b82f37c33fe346e7ac7433ec",
    },
    {
        "id": "resend-key",
        "text": "resend = Resend(api_key='" + "re" + "_sypZkfSB_jUZSDoRieH5mS7IIRdKVTSUd')",
        "rule": "resend_key",
        "secret": "jUZSDoRieH5mS7IIRdKVTSUd",
    },
    # --- .netrc -------------------------------------------------------------------------------
    {
        "id": "netrc-one-line",
        "text": "machine api.example.com login deploy password Fk8-netrc-Pw-42",
        "rule": "netrc_credentials",
        "secret": "Fk8-netrc-Pw-42",
    },
    {
        "id": "netrc-multi-line",
        "text": "~/.netrc on the runner:\nmachine git.example.com\n  login ci-bot\n"
        "  password 4f9c2e7a1b3d5f60fake0netrc0token1234\n",
        "rule": "netrc_credentials",
        "secret": "4f9c2e7a1b3d5f60fake0netrc0token1234",
    },
    {
        "id": "netrc-email-login",
        "text": "machine api.heroku.com\n  login me@example.com\n  password " + UUIDS[0],
        "rule": "netrc_credentials",
        "secret": UUIDS[0],
    },
    # --- Container and package registry auth --------------------------------------------------
    {
        "id": "docker-config-json",
        "text": '{\n  "auths": {\n    "registry.example.com": {\n      "auth": "'
        + DOCKER_AUTH
        + '"\n    }\n  }\n}',
        "rule": "registry_auth",
        "secret": DOCKER_AUTH,
    },
    {
        "id": "docker-config-two-registries",
        "text": '{"auths":{"ghcr.io":{"auth":"' + b64("deploy:Fake-Ghcr-Pw-2") + '"},'
        '"https://index.docker.io/v1/":{"auth":"' + b64("robot:Fake-Hub-Pw-3") + '"}}}',
        "rule": "registry_auth",
        "secret": b64("robot:Fake-Hub-Pw-3"),
    },
    {
        "id": "k8s-dockerconfigjson",
        "text": "data:\n  .dockerconfigjson: "
        + b64('{"auths":{"registry.example.com":{"auth":"' + DOCKER_AUTH + '"}}}'),
        "rule": "registry_auth",
        "secret": b64('{"auths":{"registry.example.com":{"auth":"' + DOCKER_AUTH + '"}}}')[12:],
    },
    {
        "id": "npmrc-auth",
        "text": "//registry.example.com/:_auth=" + b64("deploy:Fake-Npm-Pw-7"),
        "rule": "registry_auth",
        "secret": b64("deploy:Fake-Npm-Pw-7"),
    },
    # --- Chat bots and webhooks ----------------------------------------------------------------
    {
        "id": "telegram-bot-token",
        "text": "TELEGRAM_BOT_TOKEN=" + "7012345678:AA" + "GL11_pT3tRw86igsUKuQzdO5WtFntDPaD",
        "rule": "telegram_bot_token",
        "secret": "GL11_pT3tRw86igsUKuQzdO5WtFntDPaD",
    },
    {
        "id": "telegram-api-url",
        "text": "curl https://api.telegram.org/bot"
        + "5512345678:AA"
        + "wHPNkwtqZNYv8g5YGZJr9bdPEabHsdxnV/getMe",
        "rule": "telegram_bot_token",
        "secret": "wHPNkwtqZNYv8g5YGZJr9bdPEabHsdxnV",
    },
    {
        "id": "discord-bot-token",
        "text": 'client.run("' + DISCORD_TOKEN + '")',
        "rule": "discord_token",
        "secret": DISCORD_TOKEN,
    },
    {
        "id": "discord-bot-header",
        "text": "Authorization: Bot " + DISCORD_TOKEN,
        "rule": "discord_token",
        "secret": DISCORD_TOKEN,
    },
    {
        "id": "discord-webhook",
        "text": "alerts: https://discord.com/api/webhooks/1098765432109876543/"
        "Rp0YjpLEBv5_4e_Na70OeP80tDtedSkJ8VSvEDboqfXelYBGKR_Fgpq4ffOziC47zASL",
        "rule": "discord_webhook",
        "secret": "Rp0YjpLEBv5_4e_Na70OeP80tDtedSkJ8VSvEDboqfXelYBGKR_Fgpq4ffOziC47zASL",
    },
    {
        "id": "slack-app-token",
        "text": "SLACK_APP_TOKEN=" + "xa" + "pp-1-A0FAKE12345-7712365498123-"
        "5c1e0f3a9b7d2e4f6a8c0b1d3e5f7a9c5c1e0f3a9b7d2e4f6a8c0b1d3e5f7a9c",
        "rule": "slack_token",
        "secret": "5c1e0f3a9b7d2e4f6a8c0b1d3e5f7a9c5c1e0f3a9b7d2e4f6a8c0b1d3e5f7a9c",
    },
    {
        "id": "slack-refresh-token",
        "text": "rotating refresh token " + "xo" + "xe-1-My0xLTEyMzQ1Njc4OTAtRmFrZVJlZnJlc2g",
        "rule": "slack_token",
        "secret": "My0xLTEyMzQ1Njc4OTAtRmFrZVJlZnJlc2g",
    },
    {
        "id": "slack-workflow-webhook",
        "text": "https://hooks.slack.com/workflows/T0FAKE1234/A0FAKE5678/123456789012345678/"
        "nvYbSHN8GpcfBO6idPbYBuIG",
        "rule": "slack_webhook",
        "secret": "nvYbSHN8GpcfBO6idPbYBuIG",
    },
    {
        "id": "teams-webhook",
        "text": "https://contoso.webhook.office.com/webhookb2/"
        + UUIDS[0]
        + "@"
        + UUIDS[1]
        + "/IncomingWebhook/4de2c6a3469b5dbb33207b777a324a0e/"
        + UUIDS[2],
        "rule": "teams_webhook",
        "secret": "4de2c6a3469b5dbb33207b777a324a0e",
    },
    # --- Passwords on command lines -----------------------------------------------------------
    {
        "id": "mysql-attached-p",
        "text": "mysql -h db.internal -uroot -pQz8fakeRootPw shop",
        "rule": "cli_password",
        "secret": "Qz8fakeRootPw",
    },
    {
        "id": "mysqldump-quoted-p",
        "text": "mysqldump --single-transaction -u app -p'Qz8 pw 2024!' shop > shop.sql",
        "rule": "cli_password",
        "secret": "Qz8 pw 2024!",
    },
    {
        "id": "mysql-password-space",
        "text": "mysql --user=app --password Fk7-mysql-Pw shop",
        "rule": "cli_password",
        "secret": "Fk7-mysql-Pw",
    },
    {
        "id": "pgpassword-env",
        "text": "PGPASSWORD=Fk9pgPw2024 psql -h db.internal -U app shop",
        "rule": "credential_assignment",
        "secret": "Fk9pgPw2024",
    },
    {
        "id": "mysql-pwd-env",
        "text": "MYSQL_PWD=Fk9myPw2024 mysql -u app shop",
        "rule": "credential_assignment",
        "secret": "Fk9myPw2024",
    },
    {
        "id": "sshpass-p",
        "text": "sshpass -p 'Fk8-ssh-Pw!' ssh deploy@10.0.0.5 uptime",
        "rule": "cli_password",
        "secret": "Fk8-ssh-Pw!",
    },
    {
        "id": "sshpass-attached-p",
        "text": "sshpass -pFk8sshPw2024 scp dump.sql backup@10.0.0.6:/srv/backups",
        "rule": "cli_password",
        "secret": "Fk8sshPw2024",
    },
    {
        "id": "sshpass-env",
        "text": "SSHPASS='Fk8-ssh-Pw!' sshpass -e ssh deploy@10.0.0.5",
        "rule": "cli_password",
        "secret": "Fk8-ssh-Pw!",
    },
    {
        "id": "docker-login-p",
        "text": "docker login -u ci-bot -p Fk7dockerPw2024 registry.example.com",
        "rule": "cli_password",
        "secret": "Fk7dockerPw2024",
    },
    {
        "id": "script-db-password-flag",
        "text": "./deploy.sh --env prod --db-password 'Fk-deploy-Pw-9'",
        "rule": "cli_password",
        "secret": "Fk-deploy-Pw-9",
    },
    {
        "id": "api-token-flag",
        "text": "terraform-sync --api-token Fk7apiToken2024abc --workspace prod",
        "rule": "cli_password",
        "secret": "Fk7apiToken2024abc",
    },
    {
        "id": "curl-user-password",
        "text": "curl -u admin:Fk8-curl-Pw https://ci.example.com/api/json",
        "rule": "cli_password",
        "secret": "Fk8-curl-Pw",
    },
    {
        "id": "redis-cli-a",
        "text": "redis-cli -h cache.internal -a Fk7redisPw2024 INFO",
        "rule": "cli_password",
        "secret": "Fk7redisPw2024",
    },
    {
        "id": "openssl-passout",
        "text": "openssl pkcs12 -export -in cert.pem -inkey key.pem -out cert.p12 "
        "-passout pass:Fk7p12Pw",
        "rule": "cli_password",
        "secret": "Fk7p12Pw",
    },
    {
        "id": "ldapsearch-w",
        "text": "ldapsearch -x -H ldap://ldap.internal -D cn=admin,dc=example,dc=com "
        "-w Fk7ldapPw2024 -b dc=example,dc=com",
        "rule": "cli_password",
        "secret": "Fk7ldapPw2024",
    },
    {
        "id": "keytool-storepass",
        "text": "keytool -list -keystore app.jks -storepass Fk7storePw",
        "rule": "cli_password",
        "secret": "Fk7storePw",
    },
    {
        "id": "mongosh-password",
        "text": "mongosh mongodb://db.internal/app --username app --password Fk7mongoPw",
        "rule": "cli_password",
        "secret": "Fk7mongoPw",
    },
    # --- Secret stores, identities and clouds an outside corpus found missing ----------------
    {
        "id": "vault-hvs",
        "text": "VAULT_TOKEN=" + "hv" + "s.CAESIGq2Lm7Xv9Pk4Rt1Yw6Bn3Cd8Fh0Jz5Qa2Ue7Io4GhwKHGh2cy5Mb3Jx",
        "rule": "vault_token",
        "secret": "s.CAESIGq2Lm7Xv9Pk4Rt1Yw6Bn3Cd8Fh0Jz5Qa2Ue7Io4GhwKHGh2cy5Mb3Jx",
    },
    {
        "id": "doppler-personal",
        "text": "doppler login printed " + "dp.pt." + "Lm7Xv9Pk4Rt1Yw6Bn3Cd8Fh0Jz5Qa2Ue7Io4Gw2Tq",
        "rule": "doppler_token",
        "secret": "Lm7Xv9Pk4Rt1Yw6Bn3Cd8Fh0Jz5Qa2Ue7Io4Gw2Tq",
    },
    {
        "id": "age-identity",
        "text": "AGE-SECRET-KEY-" + "1GQ9LMZ7XV3PK4RT0YW6NC8DF2HJ5QA7UE9SG4TW2QLMZ7XV3PK4RT0YW6N",
        "rule": "age_secret_key",
        "secret": "1GQ9LMZ7XV3PK4RT0YW6NC8DF2HJ5QA7UE9SG4TW2QLMZ7XV3PK4RT0YW6N",
    },
    {
        "id": "kubeconfig-key-data",
        "text": "    client-key-data: " + "LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCk1IY0NBUUVFSUFm",
        "rule": "kubeconfig_client_key",
        "secret": "LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCk1IY0NBUUVFSUFm",
    },
    {
        "id": "square-access-token",
        "text": "square token " + "sq0" + "atp-Lm7Xv9Pk4Rt1Yw6Bn3Cd8F",
        "rule": "square_token",
        "secret": "atp-Lm7Xv9Pk4Rt1Yw6Bn3Cd8F",
    },
    {
        "id": "okta-ssws",
        "text": "curl -H 'Authorization: " + "SSWS 00" + "Lm7Xv9Pk4Rt1Yw6Bn3Cd8Fh0Jz5Qa2Ue7Io4Gw2T'",
        "rule": "okta_token",
        "secret": "Lm7Xv9Pk4Rt1Yw6Bn3Cd8Fh0Jz5Qa2Ue7Io4Gw2T",
    },
    {
        "id": "okta-ssws-prose",
        "text": "the okta admin token is SSWS " + "00" + "Lm7Xv9Pk4Rt1Yw6Bn3Cd8Fh0Jz5Qa2Ue7Io4Gw2T",
        "rule": "okta_token",
        "secret": "Lm7Xv9Pk4Rt1Yw6Bn3Cd8Fh0Jz5Qa2Ue7Io4Gw2T",
    },
    {
        "id": "alibaba-key-id",
        "text": "ALIBABA_CLOUD_ACCESS_KEY_ID=" + "LTAI" + "5tLm7Xv9Pk4Rt1Yw",
        "rule": "alibaba_access_key",
        "secret": "5tLm7Xv9Pk4Rt1Yw",
    },
    {
        "id": "mapbox-sk",
        "text": "mapbox upload token " + "sk" + ".eyJ1IjoiYWNtZSIsImEiOiJMbTdYdjlQazRSdDEifQ.Lm7Xv9Pk4Rt1Yw6Bn3Cd8F",
        "rule": "mapbox_secret_token",
        "secret": "eyJ1IjoiYWNtZSIsImEiOiJMbTdYdjlQazRSdDEifQ.Lm7Xv9Pk4Rt1Yw6Bn3Cd8F",
    },
    # --- Passwords stated in prose -------------------------------------------------------------
    {
        "id": "prose-password-is",
        "text": "The staging admin password is Wq9#Lm2vXk7p, rotate it after the demo.",
        "rule": "prose_password",
        "secret": "Wq9#Lm2vXk7p",
    },
    {
        "id": "prose-password-for-colon",
        "text": "password for the jenkins service account: Tz4!Pq8mLw2x",
        "rule": "prose_password",
        "secret": "Tz4!Pq8mLw2x",
    },
    {
        "id": "prose-login-pair",
        "text": "The kiosk login is kiosk / Rv7$Nm3qLp9w on every store tablet.",
        "rule": "prose_password",
        "secret": "Rv7$Nm3qLp9w",
    },
    {
        "id": "prose-passphrase-quoted-words",
        "text": 'The release signing passphrase is "orbit cactus meadow falcon" for now.',
        "rule": "prose_passphrase",
        "secret": "orbit cactus meadow falcon",
    },
    {
        "id": "prose-passphrase-diceware",
        "text": "passphrase for the offline backup key: ember-walrus-tidal-gorge",
        "rule": "prose_passphrase",
        "secret": "ember-walrus-tidal-gorge",
    },
    # --- Django's generated key and Twilio's account pair ---------------------------------------
    {
        "id": "django-insecure-key-with-parentheses",
        "text": "SECRET_KEY = 'django-" + "insecure-k3(v9!x)q2=l7m+p4r_t8w^y1b-c6d@f0g#h5j'",
        "rule": "django_secret_key",
        "secret": "k3(v9!x)q2=l7m+p4r_t8w^y1b-c6d@f0g#h5j",
    },
    {
        "id": "twilio-sid-then-auth-token",
        "text": "twilio: account AC" + "8e2f4a6c1b3d5e7f9a0c2e4f6b8d1a3c, auth token "
        "d4f6a8c0e2b4d6f8a0c2e4b6d8f0a2c4",
        "rule": "twilio_auth_token",
        "secret": "d4f6a8c0e2b4d6f8a0c2e4b6d8f0a2c4",
    },
]

HARMLESS = [
    # --- Prose about secrets, and references to a secret kept elsewhere --------------------
    # Naming a password, pointing at the vault, an environment variable, a template or a
    # variable is how notes should talk about credentials; refusing it would teach agents to
    # avoid the subject instead of the value.
    {"id": "prose", "text": "Rotate the staging password every quarter; the vault has it."},
    {"id": "prose-field", "text": "the password field is required"},
    {"id": "prose-token-colon", "text": "token: see the vault"},
    {"id": "prose-required", "text": "Password: required"},
    {"id": "none", "text": "password=None"},
    {"id": "angle-placeholder", "text": "password: <redacted>"},
    {"id": "os-environ", "text": 'password = os.environ["DB_PASSWORD"]'},
    {"id": "settings-ref", "text": "api_key=settings.API_KEY"},
    {"id": "call", "text": "token = get_token()"},
    {"id": "shell-var", "text": "password: ${DB_PASSWORD}"},
    {"id": "mask-short", "text": "password=****"},
    {"id": "mask-long", "text": "password = '************'"},
    {"id": "empty-string", "text": '"password": ""'},
    {"id": "template", "text": '"password": "{{ vault_db_password }}"'},
    {"id": "yaml-tag", "text": "password: !secret db_password"},
    {"id": "your-placeholder", "text": 'password: "<your password here>"'},
    {"id": "documented-default", "text": "password: changeme"},
    {"id": "type-annotation", "text": "api_key: SecretStr = Field(...)"},
    {"id": "kwarg-var", "text": "user = authenticate(username=username, password=raw_password)"},
    {"id": "kwarg-camel-var", "text": "client.login(token=accessToken)"},
    # Paths are where secrets live, not secrets.
    {"id": "pwd-path", "text": "PWD=/home/alice/projects"},
    {"id": "key-path", "text": "private_key: ~/.ssh/id_ed25519"},
    # --- Hashes and ids: high entropy, public by design -------------------------------------
    {"id": "commit-sha", "text": "Fixed in commit 3f786850e387550fdab836ed7e6dc881de23001b."},
    {"id": "short-sha", "text": "see 3f78685 and a1b2c3d"},
    {
        "id": "sha256",
        "text": "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    },
    {
        "id": "sha512",
        "text": "ee26b0dd4af7e749aa1a8ee3c10ae9923f618980772e473f8819a5d4940e0db27ac185f8a0e1d5f84f"
        "88bc887fd67b143732c304cc5fa9ad8e6f57f50028a8ff",
    },
    {"id": "uuid", "text": "note 7c9e6679-7425-40de-944b-e07fc1f90ae7 was superseded"},
    # --- URLs without a password, or with a documentation placeholder ----------------------
    {"id": "url-query", "text": "https://example.com/search?q=token&page=2"},
    {"id": "url-no-user", "text": "postgres://localhost:5432/app"},
    {"id": "url-user-only", "text": "https://deploy@git.example.com/org/repo.git"},
    {"id": "url-doc-placeholder", "text": "postgres://user:password@localhost:5432/app"},
    {"id": "url-template-password", "text": "redis://:${REDIS_PASSWORD}@cache:6379/0"},
    {"id": "url-ports", "text": "http://[::1]:8080/health and https://example.com:8443/a@b"},
    {"id": "scp-style-git", "text": "git clone git@github.com:org/repo.git"},
    # --- Identifiers and code that contain a key word ----------------------------------------
    {"id": "camel-case", "text": "getAccessToken() caches; passwordResetTokenTTL is 3600"},
    {"id": "snake-case", "text": "reset_password_token_ttl = 3600"},
    {"id": "token-counts", "text": "max_tokens: 4096, token_count: 123456"},
    {"id": "code", "text": "if user.check_password(raw): login(user)"},
    # --- Headers and token shapes named in prose or given as placeholders -------------------
    {"id": "authorization-prose", "text": "Authorization header must be set"},
    {
        "id": "curl-env-token",
        "text": 'curl -H "Authorization: Bearer $MEMORY_PORTAL_TOKEN" https://memory.example.com/api',
    },
    {"id": "bearer-placeholder", "text": "Authorization: Bearer <token>"},
    {"id": "bearer", "text": "Bearer authentication uses bearer tokens-described-in-rfc-six-seven"},
    {"id": "jwt-prose", "text": "the API expects a JWT in the header"},
    {"id": "base64-short", "text": "payload aGVsbG8gd29ybGQ= decodes to hello world"},
    # --- Everyday text: ids of this project, dates, paths, markdown, slugs, versions ---------
    {"id": "ulid", "text": "mem_01jh3k7sr2fzt19va038kkafac and run_01jh3k7sr2fzt19va038kkafad"},
    {"id": "dates", "text": "2024-06-11T09:30:00Z, 11/06/2024"},
    {"id": "file-path", "text": "/var/lib/memory-portal/exports/2024-06-11.jsonl"},
    {
        "id": "markdown",
        "text": "## Password policy\n\n- Minimum length: 12\n- Rotate: quarterly\n- *Never* log it",
    },
    # `sk-` inside words and slugs is not an API key: real keys are random.
    {"id": "sk-prose", "text": "task-sk-1 is done, skipped the flaky one, ask-me before merging"},
    {"id": "sk-slug", "text": "deploy sk-payments-service-eu-west-1 to staging"},
    {"id": "sk-inside-word", "text": "risk-free desk-booking-service-2024-rollout-final"},
    {"id": "issue-keys", "text": "Blocked by PIN-42 and OPS-1337"},
    {"id": "semver", "text": "upgrade from v1.2.3 to 2.0.0-rc.1"},
    {"id": "ip-addresses", "text": "hosts 192.168.1.10 and 10.0.0.1:8080, ::1"},
    {"id": "emails", "text": "mail alice@example.com or ops+alerts@example.org"},
    # Public halves and certificates are meant to be shared.
    {"id": "public-key", "text": "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOC\n"},
    {"id": "certificate", "text": "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIE\n"},
    {"id": "aws-prose", "text": "AKIA prefixes mark long-term AWS access key ids"},
    {"id": "eyj-prose", "text": "the eyJ prefix is base64 for a JSON object"},
    # Redacted text must stay clean, or a log line could never be written back.
    {"id": "already-redacted", "text": "password: [REDACTED:credential_assignment]"},
    # --- Signed URLs: documentation with placeholders, prose, URLs that grant nothing ----------
    # A signed URL is only a credential when it carries a signature (or a key id / session
    # token); the parameter names alone, or placeholder values, are documentation.
    {
        "id": "s3-presign-doc",
        "text": "Presigned URLs look like https://bucket.s3.amazonaws.com/key?X-Amz-Algorithm="
        "AWS4-HMAC-SHA256&X-Amz-Credential=<access-key-id>%2F<date>%2F<region>%2Fs3%2F"
        "aws4_request&X-Amz-Date=<timestamp>&X-Amz-Expires=3600&X-Amz-SignedHeaders=host"
        "&X-Amz-Signature=<signature>",
    },
    {
        "id": "s3-presign-prose",
        "text": "Presigned S3 links expire after X-Amz-Expires seconds (at most 604800); the "
        "X-Amz-Signature parameter is a hex HMAC-SHA256, so never paste a whole link in a note.",
    },
    {
        "id": "s3-unsigned-url",
        "text": "https://notes-exports.s3.eu-west-1.amazonaws.com/2024/06/export.jsonl"
        "?versionId=3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY",
    },
    {
        "id": "gcs-signed-doc",
        "text": "GCS V4 signing appends &X-Goog-Signature=${SIGNATURE} last; "
        "X-Goog-Credential names the service account, e.g. svc@demo-1234.iam.gserviceaccount.com",
    },
    {
        "id": "azure-sas-doc",
        "text": "A SAS looks like ?sv=2022-11-02&ss=b&srt=sco&sp=rl&se=2025-01-01T00:00:00Z"
        "&spr=https&sig=<signature>",
    },
    {
        "id": "azure-sas-prose",
        "text": "the sig field of a SAS token is the HMAC; the sv, se and sp fields are not secret",
    },
    {
        "id": "cloudfront-doc",
        "text": "CloudFront: ?Expires=<epoch>&Signature=<signature>&Key-Pair-Id=<key-pair-id>",
    },
    # AWS reserves AKIAIOSFODNN7EXAMPLE for its documentation; notes quoting the docs are common
    # and a real key id ending in EXAMPLE is vanishingly unlikely.
    {
        "id": "aws-doc-example-key-id",
        "text": "AWS docs use " + "AK" + "IAIOSFODNN7EXAMPLE as the access key id in every example",
    },
    {
        "id": "aws-doc-example-presign",
        "text": "their sample has X-Amz-Credential=" + "AK" + "IAIOSFODNN7EXAMPLE%2F20130524%2F"
        "us-east-1%2Fs3%2Faws4_request and no signature",
    },
    # --- E-mail providers: prefixes in prose, references, ids that are not keys ------------------
    {
        "id": "sendgrid-prose",
        "text": "SendGrid keys start with SG. and are shown once; ours lives in the vault",
    },
    {"id": "sendgrid-env-ref", "text": "SENDGRID_API_KEY=${SENDGRID_API_KEY}"},
    {
        "id": "mailchimp-datacenter",
        "text": "Mailchimp's datacenter is the suffix after the dash (us12); the API root is "
        "https://us12.api.mailchimp.com/3.0/",
    },
    # A Mailgun sandbox domain embeds 32 hex digits but is a public host name.
    {
        "id": "mailgun-sandbox-domain",
        "text": "test mail goes to sandbox0f1e2d3c4b5a69788796a5b4c3d2e1f0.mailgun.org",
    },
    {"id": "key-value-prose", "text": "the key-value store is keyed by key-0001 .. key-9999"},
    # A message id is a UUID too, but it identifies a sent mail and grants nothing.
    {
        "id": "postmark-message-id",
        "text": '{"To": "alice@example.com", "MessageID": "0a129aee-e1cd-480d-b08d-4f48548ff48d", '
        '"ErrorCode": 0}',
    },
    {"id": "postmark-header-placeholder", "text": "X-Postmark-Server-Token: <server token>"},
    {
        "id": "postmark-test-token-prose",
        "text": "Postmark's sandbox accepts the documented test token POSTMARK_API_TEST; "
        "nothing is sent",
    },
    {"id": "md5-with-suffix", "text": "cache key 9e107d9d372bb6826bd81d3542a419d6-v2"},
    {
        "id": "css-md-classes",
        "text": '<button class="md-button md-raised md-primary">Save</button>',
    },
    # --- .netrc: the word "machine" in prose, placeholders, anonymous FTP ----------------------
    {
        "id": "netrc-prose",
        "text": "Put credentials in ~/.netrc (machine, login, password lines) and chmod 600 it.",
    },
    {
        "id": "netrc-machine-learning",
        "text": "The machine learning login page has a password reset link for new hires",
    },
    {"id": "netrc-placeholder", "text": "machine api.example.com login <user> password <token>"},
    # Anonymous FTP: by convention the "password" is the user's e-mail address.
    {"id": "netrc-anonymous", "text": "default login anonymous password guest@example.com"},
    # --- Registries: credentials kept in a helper, settings, base64 of ordinary words ----------
    {"id": "docker-creds-store", "text": '{"auths": {"ghcr.io": {}}, "credsStore": "desktop"}'},
    {
        "id": "docker-cred-helpers",
        "text": '{"credHelpers": {"123456789012.dkr.ecr.eu-west-1.amazonaws.com": "ecr-login"}}',
    },
    {"id": "auth-setting", "text": '{"auth": "required", "scopes": ["read"]}'},
    {
        "id": "dockerconfigjson-prose",
        "text": 'the string {"auths" base64-encodes to eyJhdXRocyI6 - that is the start of '
        "every .dockerconfigjson",
    },
    {"id": "npmrc-auth-ref", "text": "//registry.example.com/:_auth=${NPM_AUTH}"},
    {"id": "base64-words", "text": "echo -n 'memory portal' | base64 prints bWVtb3J5IHBvcnRhbA=="},
    {
        "id": "base64-json-field",
        "text": '{"data": "aGVsbG8gd29ybGQgZnJvbSBtZW1vcnkgcG9ydGFs", "encoding": "base64"}',
    },
    # --- Chat bots: documented shapes, ids, prefixes in prose ----------------------------------
    # Telegram's own documentation example is one character short of a real token.
    {
        "id": "telegram-doc-example",
        "text": "Telegram documents the token shape as 123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11",
    },
    {"id": "telegram-chat-id", "text": "Telegram chat id -1001234567890, message 4242 at 14:30"},
    {
        "id": "discord-snowflakes",
        "text": "Discord user 80351110224678912 posted in channel 1098765432109876543",
    },
    {
        "id": "discord-webhook-doc",
        "text": "Discord webhook URLs look like https://discord.com/api/webhooks/<id>/<token>",
    },
    {"id": "discord-bot-placeholder", "text": "Authorization: Bot <token>"},
    # Slack's own documentation uses this all-X webhook.
    {
        "id": "slack-webhook-doc",
        "text": "Slack webhooks look like https://hooks.slack.com/services/T00000000/B00000000/"
        "XXXXXXXXXXXXXXXXXXXXXXXX",
    },
    {
        "id": "slack-prefix-prose",
        "text": "Slack bot tokens start with xoxb- and app-level tokens with xapp-",
    },
    {"id": "xoxo", "text": "thanks for the help :xoxo-hearts: see you at standup"},
    {
        "id": "teams-prose",
        "text": "Teams: paste the Incoming Webhook URL from the channel settings into "
        "TEAMS_WEBHOOK_URL",
    },
    # --- Command lines: prompts, references, files, stdin, ports, prose -----------------------
    # A bare -p makes mysql prompt, and the word after it is the database.
    {"id": "mysql-prompt", "text": "mysql -u root -p shop   # prompts for the password"},
    {"id": "mysql-port", "text": "mysql -h db.internal -P 3306 -u app -p"},
    {"id": "mysql-env-ref", "text": "mysqldump -uroot -p$MYSQL_ROOT_PASSWORD shop > shop.sql"},
    {"id": "mysql-doc-placeholder", "text": "mysql -uroot -pPASSWORD"},
    {
        "id": "docker-login-stdin",
        "text": "echo $CR_PAT | docker login ghcr.io -u USERNAME --password-stdin",
    },
    {"id": "password-file", "text": "restic backup /srv --password-file /run/secrets/restic"},
    {"id": "password-flag-env", "text": "app-cli sync --password $DB_PASSWORD --verbose"},
    {"id": "psql-password-prompt", "text": "psql -h db -U app --password   # same as -W"},
    {"id": "sshpass-file", "text": "sshpass -f ~/.ssh/pw ssh deploy@10.0.0.5"},
    {"id": "sshpass-env-ref", "text": "SSHPASS=$(pass show infra/ssh) sshpass -e ssh deploy@host"},
    {"id": "pgpassword-ref", "text": "PGPASSWORD=$(cat /run/secrets/pg) psql -h db -U app"},
    {"id": "curl-user-ref", "text": 'curl -u "$USER:$TOKEN" https://api.example.com/v1/me'},
    {"id": "curl-user-prompt", "text": "curl -u admin: https://ci.example.com/api/json"},
    {"id": "redis-cli-ref", "text": 'redis-cli -h cache -a "$REDIS_PASSWORD" PING'},
    {
        "id": "openssl-env-pass",
        "text": "openssl pkcs12 -export -passout env:P12_PASSWORD -out cert.p12",
    },
    {"id": "ldap-prompt", "text": "ldapsearch -x -W -D cn=admin,dc=example,dc=com"},
    # The JDK's trust store ships with the documented password "changeit".
    {"id": "keytool-default", "text": "keytool -list -keystore cacerts -storepass changeit"},
    {
        "id": "flag-prose",
        "text": "pass --token together with --user when the API asks for it",
    },
    {
        "id": "ansible-vault-flags",
        "text": "ansible-playbook site.yml --ask-vault-pass --vault-password-file ~/.vault_pw",
    },
    {"id": "api-key-flag-placeholder", "text": "cli --api-key YOUR_API_KEY or --api-key API_KEY"},
    {"id": "mkdir-p", "text": "mkdir -p /srv/app && tar -xzf app.tgz -C /srv/app"},
    {"id": "ssh-port", "text": "ssh -p 2222 deploy@10.0.0.5 and docker run -p 8080:80 nginx"},
    # --- Passwords in prose without a value; stores, identities and clouds named only -------
    {"id": "prose-password-is-stored", "text": "The admin password is stored in Vault, ask #infra."},
    {"id": "prose-password-for-the", "text": "password for the kiosk: see the store manual, page 4"},
    {"id": "prose-login-is-email", "text": "The login is your work email / SSO, no password."},
    {"id": "prose-password-was-reset", "text": "The password was reset yesterday by the on-call."},
    {"id": "vault-prefix-prose", "text": "Vault service tokens start with hvs. and batch ones with hvb."},
    {"id": "age-public-recipient", "text": "recipients: age1lggyhqrw2nlhcxprm67z43rta597azn8gknawjehu9d9dl0jq3yqqvfafg"},
    {"id": "kube-cert-data-ref", "text": "client-key-data: <base64 of the key>, kept out of git"},
    {"id": "alibaba-prose", "text": "Alibaba key ids start with LTAI; ours is in the RAM console."},
    {"id": "stripe-mask", "text": "STRIPE_SECRET_KEY=sk_live_xxxxxxxxxxxxxxxxxxxxxxxx"},
    # --- Ids, hashes and references that are not secrets ---------------------------------------
    {
        "id": "ulids-of-every-kind",
        "text": "rec_01jd3k7sr2fzt19va038kkafac restored mem_01jd3k7sr2fzt19va038kkafab for "
        "agt_01jd3k7sr2fzt19va038kkafad in run_01jd3k7sr2fzt19va038kkafae",
    },
    {
        "id": "commit-url",
        "text": "https://github.com/org/repo/commit/3f786850e387550fdab836ed7e6dc881de23001b",
    },
    {
        "id": "git-log-line",
        "text": "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 (HEAD -> main)",
    },
    {
        "id": "image-digest",
        "text": "ghcr.io/org/app@sha256:"
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    },
    {
        "id": "lockfile-integrity",
        "text": '"integrity": "sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DG'
        'NKHfuwvY7kxvUR6eNo3GSwRh5sKhjA=="',
    },
    {
        "id": "token-usage-prose",
        "text": "the run used 4,096 tokens; the token budget resets at midnight UTC",
    },
    {"id": "api-key-metadata", "text": "api_key_id: 42, api_key_name: ci-deploy, api_key_count: 3"},
    {
        "id": "k8s-secret-ref",
        "text": "valueFrom:\n  secretKeyRef:\n    name: db-credentials\n    key: password",
    },
    {"id": "gha-secret-ref", "text": "DB_PASSWORD: ${{ secrets.DB_PASSWORD }}"},
    {"id": "command-substitution", "text": "token=$(gh auth token)"},
    {"id": "request-id", "text": "X-Request-Id: 0a129aee-e1cd-480d-b08d-4f48548ff48d"},
    {"id": "asset-hash", "text": "the bundle is app.4f9c2e7a1b3d5f60.js, cached for a year"},
    # A passphrase mentioned, not given; Django's key read from the environment; a Twilio SID
    # with the id of a message (34 characters, not 32 hex) beside it.
    {"id": "passphrase-stored", "text": "The passphrase is stored in the team vault, not here."},
    {"id": "passphrase-template", "text": 'passphrase: "${GPG_PASSPHRASE}" in the CI config'},
    {"id": "django-key-from-env", "text": "SECRET_KEY = os.environ['DJANGO_SECRET_KEY']"},
    {
        "id": "twilio-sid-and-message-sid",
        "text": "account AC" + "8e2f4a6c1b3d5e7f9a0c2e4f6b8d1a3c sent SM"
        "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d",
    },
]
