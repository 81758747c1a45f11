"""The labelled recall set (docs/RECALL.md, "Quality"): facts four agents plausibly saved while
working on one shop (deploys, CI and flaky tests, third-party API quirks, people's preferences
and the repository layout), queries phrased the way a task or a question arrives at the start
of a run, and for each query the facts a careful engineer would want recalled.

Rules the labels follow:

- recall is per agent, so a query's candidates are its agent's facts only, and its expected
  keys name facts of that agent;
- a fact is expected when knowing it changes how the task is done, not merely because it shares
  a word with the query (the "hard negatives" are facts of the same agent on a neighbouring
  topic: the staging vs. the production deploy, two ShipFast quirks, two of Tom's habits);
- queries do not copy the fact's wording: they use synonyms, other inflections, a ticket key,
  or only part of the vocabulary;
- UNRELATED queries are checked against every agent's facts and must recall nothing;
- HELD_OUT queries were written after the scorer was tuned and before their scores were seen;
  they are reported apart and not asserted by the floor test.

Plain data: `memory_recall_eval --dataset PATH` loads this file with runpy.
"""

FACTS = [
    # --- release: the runtime agent that deploys the storefront ------------------------------
    {
        "key": "staging_vpn",
        "agent": "release",
        "text": "The staging deploy needs the VPN on; without it the helm upgrade times out "
        "after 5 minutes with 'context deadline exceeded' (PIN-812).",
    },
    {
        "key": "prod_window",
        "agent": "release",
        "text": "Production releases only go out Tuesday to Thursday, 09:00-15:00 UTC. A Friday "
        "deploy needs Maya's written OK in #release first.",
    },
    {
        "key": "migrations_first",
        "agent": "release",
        "text": "Run the Django migrations as a separate job (make migrate-prod) before rolling "
        "the web pods; the pods crash-loop while the schema is behind.",
    },
    {
        "key": "rollback",
        "agent": "release",
        "text": "To roll back prod use `helm rollback storefront <revision>`, not a revert "
        "commit: the image tag is pinned in values-prod.yaml and a revert does not retag.",
    },
    {
        "key": "cdn_purge",
        "agent": "release",
        "text": "After a frontend release purge the CloudFront cache for /static/*, otherwise "
        "browsers keep the old JS bundle for up to 24 hours.",
    },
    {
        "key": "feature_flags",
        "agent": "release",
        "text": "Feature flags live in the LaunchDarkly project 'storefront'. New checkout flags "
        "default to off in prod until QA signs off.",
    },
    {
        "key": "staging_secrets",
        "agent": "release",
        "text": "Kubernetes secrets for staging come from Vault at kv/storefront/staging; the "
        "pipeline injects them. Never paste them into a values file.",
    },
    {
        "key": "canary",
        "agent": "release",
        "text": "Prod rollouts start as a 10% canary for 30 minutes. Watch the p95 latency "
        "panel on the 'Storefront / Canary' Grafana board before promoting it.",
    },
    {
        "key": "docker_cache",
        "agent": "release",
        "text": "The Docker image build takes ~12 min when poetry.lock changed because the "
        "dependency layer is rebuilt; otherwise it is about 3 min.",
    },
    {
        "key": "oncall",
        "agent": "release",
        "text": "Ravi is the on-call SRE for the storefront this quarter. Page him through "
        "PagerDuty, not a Slack DM, for anything that affects prod.",
    },
    {
        "key": "db_backup",
        "agent": "release",
        "text": "Nightly backups of the prod Postgres run at 02:00 UTC; heavy migrations between "
        "01:30 and 03:00 block on the backup's lock.",
    },
    {
        "key": "staging_reset",
        "agent": "release",
        "text": "Staging data is reset from an anonymised prod snapshot every Monday 06:00 UTC; "
        "orders created on staging are gone after the weekend.",
    },
    {
        "key": "image_registry",
        "agent": "release",
        "text": "Images go to ghcr.io/acme/storefront. The registry token in CI expires every 90 "
        "days and the push then fails with 'denied: unauthorized'.",
    },
    {
        "key": "readiness_redis",
        "agent": "release",
        "text": "The readiness probe /healthz/ready also checks Redis: with Redis down the pods "
        "never become ready and the rollout stalls.",
    },
    {
        "key": "changelog",
        "agent": "release",
        "text": "Release notes go in CHANGELOG.md under 'Unreleased'; scripts/release.sh moves "
        "them under the new version heading.",
    },
    {
        "key": "celery_restart",
        "agent": "release",
        "text": "Celery workers ship in their own chart (storefront-worker) and must be "
        "restarted after any change to tasks.py, or they keep running the old code.",
    },
    {
        "key": "dns_ttl",
        "agent": "release",
        "text": "shop.acme.test has a 1-hour DNS TTL; lower it to 60 s a day before switching "
        "traffic to a new load balancer.",
    },
    {
        "key": "prod_logs",
        "agent": "release",
        "text": "Prod application logs are in Loki under app=storefront; kubectl logs only "
        "keeps the last 10 MB per pod.",
    },
    # --- ci: the agent that keeps the test suite and the pipeline green -----------------------
    {
        "key": "flaky_coupon",
        "agent": "ci",
        "text": "test_checkout_applies_coupon is flaky: it breaks when the run crosses midnight "
        "UTC. Freeze the clock with time_machine rather than re-running CI.",
    },
    {
        "key": "playwright_workers",
        "agent": "ci",
        "text": "Playwright e2e tests time out in CI with more than 4 workers. Keep --workers=4 "
        "in ci.yml even though 8 works locally.",
    },
    {
        "key": "test_postgres",
        "agent": "ci",
        "text": "The test suite needs Postgres 16 with the pg_trgm extension; on SQLite the "
        "search tests are skipped, which hides real failures.",
    },
    {
        "key": "factories",
        "agent": "ci",
        "text": "Test data comes from factory_boy factories in tests/factories.py. Bruno "
        "rejects PRs that add JSON fixtures.",
    },
    {
        "key": "pip_cache",
        "agent": "ci",
        "text": "CI caches pip downloads keyed on requirements.lock. After a dependency bump a "
        "'hash mismatch' failure means the cache is stale: clear it in the Actions UI.",
    },
    {
        "key": "slow_marker",
        "agent": "ci",
        "text": "The full suite takes 14 minutes. Locally run pytest -m 'not slow'; the slow "
        "marker covers e2e and migration tests.",
    },
    {
        "key": "email_snapshots",
        "agent": "ci",
        "text": "Email rendering is covered by snapshot tests in tests/snapshots/. Regenerate "
        "with pytest --snapshot-update and review the diff; never hand-edit them.",
    },
    {
        "key": "cart_redis",
        "agent": "ci",
        "text": "Cart tests need Redis on localhost:6379; docker compose -f "
        "docker-compose.test.yml up starts one.",
    },
    {
        "key": "flaky_search",
        "agent": "ci",
        "text": "test_search_ranking fails now and then because the index refreshes "
        "asynchronously. Call index.refresh() in the fixture; do not add a sleep.",
    },
    {
        "key": "diff_coverage",
        "agent": "ci",
        "text": "The build fails when coverage of changed lines is under 85% (diff-cover); "
        "total coverage is not gated.",
    },
    {
        "key": "mutmut_nightly",
        "agent": "ci",
        "text": "Mutation testing (mutmut) runs nightly only. A red nightly mutmut job does not "
        "block merging.",
    },
    {
        "key": "tz_assertions",
        "agent": "ci",
        "text": "CI runs with TZ=UTC while most laptops are on Europe/Berlin, so date "
        "assertions must compare timezone-aware datetimes.",
    },
    {
        "key": "runner_memory",
        "agent": "ci",
        "text": "The self-hosted runners have 8 GB RAM; the webpack build gets OOM-killed when "
        "it runs in parallel with the e2e job.",
    },
    {
        "key": "quarantine",
        "agent": "ci",
        "text": "We don't use pytest-rerunfailures. A flaky test gets a ticket labelled 'flaky' "
        "and is quarantined with @pytest.mark.quarantine until fixed.",
    },
    {
        "key": "ruff_pin",
        "agent": "ci",
        "text": "Ruff runs in pre-commit and again in CI; CI uses the version pinned in "
        "pyproject.toml, so upgrade the pin rather than the hook alone.",
    },
    {
        "key": "contract_tests",
        "agent": "ci",
        "text": "Contract tests against the payments sandbox run only on main, since the sandbox "
        "allows 100 requests per minute.",
    },
    {
        "key": "make_seed",
        "agent": "ci",
        "text": "make seed loads demo products for local testing but wipes the local database "
        "first, without asking.",
    },
    # --- integrations: the agent that maintains the third-party API clients -------------------
    {
        "key": "stripe_idempotency",
        "agent": "integrations",
        "text": "Stripe: every POST that creates a charge must send an Idempotency-Key header; "
        "retries without one created duplicate charges (PIN-377).",
    },
    {
        "key": "stripe_webhook_order",
        "agent": "integrations",
        "text": "Stripe webhooks arrive out of order: payment_intent.succeeded can come before "
        "payment_intent.created, so the handlers must upsert.",
    },
    {
        "key": "shipfast_cursor",
        "agent": "integrations",
        "text": "ShipFast paginates with a cursor in the Link header; a page=2 parameter is "
        "silently ignored and returns the first page again.",
    },
    {
        "key": "shipfast_429",
        "agent": "integrations",
        "text": "ShipFast allows 10 requests/s per API key and answers 429 with Retry-After in "
        "milliseconds, not seconds.",
    },
    {
        "key": "odoo_local_time",
        "agent": "integrations",
        "text": "The Odoo ERP export gives timestamps in Europe/Berlin local time without an "
        "offset; convert them before comparing with our UTC dates.",
    },
    {
        "key": "odoo_session",
        "agent": "integrations",
        "text": "Odoo XML-RPC sessions expire after 15 minutes idle. On a 'Session expired' "
        "fault the client must log in again instead of failing the sync.",
    },
    {
        "key": "taxjar_canada",
        "agent": "integrations",
        "text": "The TaxJar sandbox always returns 0 tax for Canadian addresses; check Canadian "
        "tax against the live API with the test account.",
    },
    {
        "key": "postmark_batch",
        "agent": "integrations",
        "text": "Postmark rejects a message with more than 50 recipients; send newsletters in "
        "batches of 50.",
    },
    {
        "key": "algolia_eventual",
        "agent": "integrations",
        "text": "Algolia index updates are eventually consistent (usually within 2 s). The "
        "product sync must not read back right after writing.",
    },
    {
        "key": "jpy_minor_unit",
        "agent": "integrations",
        "text": "Stripe amounts are integers in the smallest currency unit, but JPY has no minor "
        "unit: never multiply yen amounts by 100.",
    },
    {
        "key": "shipfast_signature",
        "agent": "integrations",
        "text": "Verify ShipFast webhook signatures on the raw request body; request.POST "
        "re-encodes it and the HMAC check fails.",
    },
    {
        "key": "loqate_cache",
        "agent": "integrations",
        "text": "Loqate charges per address lookup. Cache validation results for 30 days, keyed "
        "on the normalised address.",
    },
    {
        "key": "stripe_api_version",
        "agent": "integrations",
        "text": "The Stripe API version is pinned to 2023-10-16 in the dashboard and in code; "
        "the last upgrade changed the shape of charge objects.",
    },
    {
        "key": "twilio_sender_de",
        "agent": "integrations",
        "text": "Twilio SMS to Germany needs an alphanumeric sender ID registered in advance; "
        "messages from an unregistered ID are dropped silently.",
    },
    {
        "key": "odoo_sku_case",
        "agent": "integrations",
        "text": "Odoo SKUs are case-sensitive but the storefront lowercases them. Match "
        "products on Odoo's external_id, not on the SKU.",
    },
    {
        "key": "merchant_refresh_token",
        "agent": "integrations",
        "text": "The Google Merchant API refresh token is revoked after 6 months unused; the "
        "feed job then logs 'invalid_grant' and a person has to re-consent.",
    },
    {
        "key": "shipfast_labels",
        "agent": "integrations",
        "text": "ShipFast label PDF URLs expire after 24 hours. Copy the PDF to S3 when the "
        "label is created instead of storing the URL.",
    },
    # --- reviewer: the code-review agent (people's preferences, repository layout) -------------
    {
        "key": "ana_squash",
        "agent": "reviewer",
        "text": "Ana prefers squash merges on the billing repo, with one commit message in the "
        "imperative mood.",
    },
    {
        "key": "tom_pr_size",
        "agent": "reviewer",
        "text": "Tom won't review a PR over 400 changed lines; he asks for it to be split into "
        "stacked PRs.",
    },
    {
        "key": "apps_layout",
        "agent": "reviewer",
        "text": "In the storefront repo Django apps live in src/storefront/apps/<name>/; shared "
        "helpers go in src/storefront/core/, not in a utils.py per app.",
    },
    {
        "key": "frontend_layout",
        "agent": "reviewer",
        "text": "The React frontend is in frontend/ with its own package.json. The API types in "
        "frontend/src/api/ are generated by make openapi; never edit them by hand.",
    },
    {
        "key": "orders_dba",
        "agent": "reviewer",
        "text": "Any migration adding a column to the orders table (40M rows) needs a review "
        "from Lena, the DBA; add her as a reviewer.",
    },
    {
        "key": "service_naming",
        "agent": "reviewer",
        "text": "Service functions are named noun_verb (order_cancel, cart_add); reviewers "
        "flag verb-first names like cancel_order.",
    },
    {
        "key": "mypy_strict",
        "agent": "reviewer",
        "text": "mypy is strict only for src/storefront/core/ and apps/payments/; the other "
        "apps are checked leniently.",
    },
    {
        "key": "adr",
        "agent": "reviewer",
        "text": "Architecture decision records live in docs/adr/, numbered 0001-…; a change of "
        "approach gets a new ADR rather than an edit of an old one.",
    },
    {
        "key": "maya_tests",
        "agent": "reviewer",
        "text": "Maya blocks payments PRs that add code without tests; she accepts a follow-up "
        "ticket only for admin UI changes.",
    },
    {
        "key": "commit_ticket",
        "agent": "reviewer",
        "text": "Commit messages start with the ticket key, e.g. 'PIN-812: fix staging deploy'; "
        "the merge check rejects commits without one.",
    },
    {
        "key": "codeowners_payments",
        "agent": "reviewer",
        "text": "CODEOWNERS gives apps/payments/ to the payments team: a PR touching it needs "
        "one approval from that team plus one other.",
    },
    {
        "key": "settings_split",
        "agent": "reviewer",
        "text": "Settings are split into src/storefront/settings/{base,dev,prod}.py. A new "
        "setting goes in base.py with an env var override, never in prod.py alone.",
    },
    {
        "key": "tom_comments",
        "agent": "reviewer",
        "text": "Tom dislikes comments that restate the code; he wants a docstring that "
        "explains why.",
    },
    {
        "key": "legacy_php",
        "agent": "reviewer",
        "text": "legacy/ holds the old PHP checkout, still used for B2B orders. Don't refactor "
        "it: only security fixes are allowed there.",
    },
    {
        "key": "review_sla",
        "agent": "reviewer",
        "text": "Reviews are due within one working day. If nobody picks a PR up, ask in "
        "#storefront-dev rather than pinging people directly.",
    },
    {
        "key": "ana_hours",
        "agent": "reviewer",
        "text": "Ana works from São Paulo (UTC-3) and wants review requests before 18:00 UTC.",
    },
    {
        "key": "email_templates",
        "agent": "reviewer",
        "text": "Email templates are in src/storefront/templates/emails/ and each one needs "
        "both an .html and a .txt version.",
    },
]

QUERIES = [
    # --- release ---------------------------------------------------------------------------
    {
        "agent": "release",
        "query": "PIN-901: the staging deployment hangs during helm upgrade, investigate",
        "expected": {"staging_vpn", "readiness_redis"},
    },
    {
        "agent": "release",
        "query": "Can I ship the new checkout to production on Friday afternoon?",
        "expected": {"prod_window", "feature_flags"},
    },
    {
        "agent": "release",
        "query": "Roll back this morning's broken production release",
        "expected": {"rollback"},
    },
    {
        "agent": "release",
        "query": "Customers still get the old JavaScript after yesterday's frontend deploy",
        "expected": {"cdn_purge"},
    },
    {
        "agent": "release",
        "query": "Deploy the migration that adds a column to the orders table in prod",
        "expected": {"migrations_first", "db_backup"},
    },
    {
        "agent": "release",
        "query": "Prod is down: who is on call for the storefront and how do I reach them?",
        "expected": {"oncall"},
    },
    {
        "agent": "release",
        "query": "Pushing the image to the container registry fails in CI with unauthorized",
        "expected": {"image_registry"},
    },
    {
        "agent": "release",
        "query": "Background workers still run the previous code after the deploy",
        "expected": {"celery_restart"},
    },
    {
        "agent": "release",
        "query": "Where do I find the production logs of the storefront pods?",
        "expected": {"prod_logs"},
    },
    {
        "agent": "release",
        "query": "Plan the cutover of shop traffic to the new load balancer",
        "expected": {"dns_ttl"},
    },
    {
        "agent": "release",
        "query": "Promote the canary of release 2.14 to all of production",
        "expected": {"canary"},
    },
    {
        "agent": "release",
        "query": "The test orders I placed on staging last week have disappeared",
        "expected": {"staging_reset"},
    },
    {
        "agent": "release",
        "query": "Why does building the docker image take so long sometimes?",
        "expected": {"docker_cache"},
    },
    {
        "agent": "release",
        "query": "Configure the secrets for the storefront's staging environment",
        "expected": {"staging_secrets"},
    },
    {
        "agent": "release",
        "query": "Write the release notes for version 2.14",
        "expected": {"changelog"},
    },
    {
        "agent": "release",
        "query": "Deploy storefront release 2.14 to production",
        "expected": {"prod_window", "migrations_first", "canary"},
    },
    # --- ci ----------------------------------------------------------------------------------
    {
        "agent": "ci",
        "query": "Fix the flaky coupon test in the checkout suite",
        "expected": {"flaky_coupon"},
    },
    {
        "agent": "ci",
        "query": "End-to-end browser tests keep timing out on the CI pipeline",
        "expected": {"playwright_workers"},
    },
    {
        "agent": "ci",
        "query": "Set up a local database so I can run the test suite",
        "expected": {"test_postgres", "cart_redis"},
    },
    {
        "agent": "ci",
        "query": "Add test data for the new discount model",
        "expected": {"factories"},
    },
    {
        "agent": "ci",
        "query": "The CI job fails with a hash mismatch after upgrading dependencies",
        "expected": {"pip_cache"},
    },
    {
        "agent": "ci",
        "query": "Running all the tests on my machine is too slow",
        "expected": {"slow_marker"},
    },
    {
        "agent": "ci",
        "query": "Change the order confirmation email and update its tests",
        "expected": {"email_snapshots"},
    },
    {
        "agent": "ci",
        "query": "The search ranking test fails intermittently",
        "expected": {"flaky_search"},
    },
    {
        "agent": "ci",
        "query": "My build went red because coverage dropped",
        "expected": {"diff_coverage"},
    },
    {
        "agent": "ci",
        "query": "The nightly mutation run is failing; does it block my merge?",
        "expected": {"mutmut_nightly"},
    },
    {
        "agent": "ci",
        "query": "A date assertion fails on my laptop but passes in CI",
        "expected": {"tz_assertions"},
    },
    {
        "agent": "ci",
        "query": "The webpack build is killed for running out of memory on the runner",
        "expected": {"runner_memory"},
    },
    {
        "agent": "ci",
        "query": "Which ruff version does CI lint with?",
        "expected": {"ruff_pin"},
    },
    {
        "agent": "ci",
        "query": "The payments contract tests did not run on my branch",
        "expected": {"contract_tests"},
    },
    {
        "agent": "ci",
        "query": "A test fails randomly in CI; can we add automatic reruns for it?",
        "expected": {"quarantine"},
    },
    # --- integrations --------------------------------------------------------------------------
    {
        "agent": "integrations",
        "query": "Customers were charged twice when the payment request was retried",
        "expected": {"stripe_idempotency"},
    },
    {
        "agent": "integrations",
        "query": "Handle the Stripe payment intent webhook events",
        "expected": {"stripe_webhook_order"},
    },
    {
        "agent": "integrations",
        "query": "Import every shipment from ShipFast; the sync only ever gets the first page",
        "expected": {"shipfast_cursor", "shipfast_429"},
    },
    {
        "agent": "integrations",
        "query": "ShipFast answers 429 Too Many Requests during the nightly sync",
        "expected": {"shipfast_429"},
    },
    {
        "agent": "integrations",
        "query": "Order dates imported from the ERP export are off by one or two hours",
        "expected": {"odoo_local_time"},
    },
    {
        "agent": "integrations",
        "query": "The Odoo sync dies after a while with a session error",
        "expected": {"odoo_session"},
    },
    {
        "agent": "integrations",
        "query": "Calculate sales tax for orders shipped to Canada",
        "expected": {"taxjar_canada"},
    },
    {
        "agent": "integrations",
        "query": "Send the monthly newsletter to all subscribers",
        "expected": {"postmark_batch"},
    },
    {
        "agent": "integrations",
        "query": "The product sync writes to Algolia and then reads stale search results",
        "expected": {"algolia_eventual"},
    },
    {
        "agent": "integrations",
        "query": "Prices in Japanese yen come out 100 times too high at checkout",
        "expected": {"jpy_minor_unit"},
    },
    {
        "agent": "integrations",
        "query": "Signature verification fails for the shipping webhook notifications",
        "expected": {"shipfast_signature"},
    },
    {
        "agent": "integrations",
        "query": "Reduce what we spend on address validation lookups",
        "expected": {"loqate_cache"},
    },
    {
        "agent": "integrations",
        "query": "Upgrade the Stripe library and its API version",
        "expected": {"stripe_api_version"},
    },
    {
        "agent": "integrations",
        "query": "SMS order notifications to German customers never arrive",
        "expected": {"twilio_sender_de"},
    },
    {
        "agent": "integrations",
        "query": "Match storefront products to ERP items by SKU",
        "expected": {"odoo_sku_case"},
    },
    {
        "agent": "integrations",
        "query": "The merchant feed job fails with invalid_grant",
        "expected": {"merchant_refresh_token"},
    },
    {
        "agent": "integrations",
        "query": "Shipping label download links return 404 the next day",
        "expected": {"shipfast_labels"},
    },
    # --- reviewer -------------------------------------------------------------------------------
    {
        "agent": "reviewer",
        "query": "Review Ana's pull request on the billing repository",
        "expected": {"ana_squash"},
    },
    {
        "agent": "reviewer",
        "query": "Tom requested changes on my 900-line pull request",
        "expected": {"tom_pr_size", "tom_comments"},
    },
    {
        "agent": "reviewer",
        "query": "Where should the new gift card Django app go in the storefront repo?",
        "expected": {"apps_layout"},
    },
    {
        "agent": "reviewer",
        "query": "Regenerate the TypeScript API client after changing an endpoint",
        "expected": {"frontend_layout"},
    },
    {
        "agent": "reviewer",
        "query": "Add a discount_code column to orders",
        "expected": {"orders_dba"},
    },
    {
        "agent": "reviewer",
        "query": "What should the new service function that cancels a subscription be called?",
        "expected": {"service_naming"},
    },
    {
        "agent": "reviewer",
        "query": "mypy reports errors only in the payments app",
        "expected": {"mypy_strict"},
    },
    {
        "agent": "reviewer",
        "query": "We are moving from Celery to RQ; record the decision",
        "expected": {"adr"},
    },
    {
        "agent": "reviewer",
        "query": "Open a PR that adds a refund endpoint to payments, tests to follow later",
        "expected": {"maya_tests", "codeowners_payments"},
    },
    {
        "agent": "reviewer",
        "query": "Write the commit message for the staging deploy fix",
        "expected": {"commit_ticket"},
    },
    {
        "agent": "reviewer",
        "query": "Add a configuration setting for the payment timeout",
        "expected": {"settings_split"},
    },
    {
        "agent": "reviewer",
        "query": "Refactor the old PHP checkout code used for B2B orders",
        "expected": {"legacy_php"},
    },
    {
        "agent": "reviewer",
        "query": "My PR has waited two days without a review",
        "expected": {"review_sla"},
    },
    {
        "agent": "reviewer",
        "query": "Add a password reset email template",
        "expected": {"email_templates"},
    },
    {
        "agent": "reviewer",
        "query": "Who has to approve changes to the payments app?",
        "expected": {"codeowners_payments", "maya_tests"},
    },
]

# Checked against every agent's facts: none may score at or above the threshold. All but one
# are close to work (tasks at the same company no fact answers), and may get a "possibly
# related" pick; the off-topic one may get nothing. The split was made from the questions'
# words alone (2026-12-03), as the second tier was added.
UNRELATED_OFF_TOPIC = ["What is the capital of Australia?"]
UNRELATED = [
    "Translate the marketing landing page into French",
    "Renew the TLS certificate of the corporate wiki",
    "Summarise last quarter's hiring plan for the board",
    "Fix the typo in the office Wi-Fi instructions",
    *UNRELATED_OFF_TOPIC,
    "Order new laptops for the design team",
    "Draft a blog post about the company retreat in Lisbon",
    "Build the quarterly revenue forecast spreadsheet",
    "Update the vacation policy in the employee handbook",
    "Choose a colour palette for the onboarding screens of the mobile app",
]

# Written after tuning, before their scores were seen (docs/RECALL.md): reported apart.
HELD_OUT = [
    {
        "agent": "release",
        "query": "PIN-1043: since last night's deploy the storefront pods never become ready and "
        "the rollout is stuck at 1/3 replicas. Find out why and get prod healthy again.",
        "expected": {"readiness_redis", "rollback"},
    },
    {
        "agent": "ci",
        "query": "The Playwright suite is unstable on the CI runners: tests fail now and then "
        "with timeouts",
        "expected": {"playwright_workers", "quarantine"},
    },
    {
        "agent": "integrations",
        "query": "Stripe refunds sometimes get issued twice when the job retries",
        "expected": {"stripe_idempotency"},
    },
    {
        "agent": "reviewer",
        "query": "Review the PR that moves shared helpers out of apps/orders/utils.py",
        "expected": {"apps_layout"},
    },
    {
        "agent": "integrations",
        "query": "Write the nightly job that pulls products and their last-modified timestamps "
        "from the Odoo export into the storefront",
        "expected": {"odoo_local_time", "odoo_sku_case", "odoo_session"},
    },
]

# A run's task (POST …/runs {"task": {"title", "description"}}): a start recall without a query
# scores against the title and description together (docs/RECALL.md, "Against the task"). Longer
# than a query, with the background a ticket carries; labelled by the rules above, before their
# scores were seen.
TASKS = [
    {
        "agent": "release",
        "task": {
            "title": "PIN-1102: Release the merchant CSV order export to production",
            "description": "The export is merged and has been green on staging since Monday. "
            "Roll it out to prod this week, watch the new version while it takes traffic, and be "
            "ready to back it out quickly if error rates climb.",
        },
        "expected": {"prod_window", "canary", "rollback"},
    },
    {
        "agent": "release",
        "task": {
            "title": "PIN-1120: Add a gift_message column to orders",
            "description": "Product wants customers to add a gift message at checkout. Add the "
            "model field and its migration, expose it in the checkout API and get it deployed.",
        },
        "expected": {"migrations_first", "db_backup"},
    },
    {
        "agent": "release",
        "task": {
            "title": "Move shop.acme.test to the new load balancer",
            "description": "Infra set up a new ALB for the storefront. Switch production "
            "traffic over to it with as little downtime as possible and keep the old one until "
            "we are sure.",
        },
        "expected": {"dns_ttl"},
    },
    {
        "agent": "ci",
        "task": {
            "title": "PIN-990: the nightly pipeline is red around midnight",
            "description": "The checkout tests fail on the nightly pipeline but pass when re-run "
            "in the morning. Find the cause and make the suite deterministic; re-running is not "
            "a fix.",
        },
        "expected": {"flaky_coupon", "tz_assertions"},
    },
    {
        "agent": "ci",
        "task": {
            "title": "Speed up the GitHub Actions pipeline",
            "description": "Pull requests wait about 25 minutes for CI. Look at the caching of "
            "Python dependencies and at what runs in parallel on the self-hosted runners, "
            "without losing the coverage gate.",
        },
        "expected": {"pip_cache", "runner_memory", "diff_coverage"},
    },
    {
        "agent": "integrations",
        "task": {
            "title": "PIN-1200: Sync shipment labels from ShipFast",
            "description": "For each order shipped through ShipFast, fetch every label created "
            "since the last sync (the list endpoint returns them page by page) and keep the PDF "
            "with the order so support can reprint it weeks later.",
        },
        "expected": {"shipfast_cursor", "shipfast_labels", "shipfast_429"},
    },
    {
        "agent": "integrations",
        "task": {
            "title": "Support payments in Japanese yen",
            "description": "Marketing launches the storefront in Japan next month. Make checkout "
            "charge customers in JPY through Stripe, including retries when the charge request "
            "times out.",
        },
        "expected": {"jpy_minor_unit", "stripe_idempotency"},
    },
    {
        "agent": "integrations",
        "task": {
            "title": "Send the weekly newsletter through Postmark",
            "description": "Replace the old Mailchimp job: render the weekly newsletter and send "
            "it to all 12,000 subscribers through Postmark.",
        },
        "expected": {"postmark_batch"},
    },
    {
        "agent": "reviewer",
        "task": {
            "title": "Review PIN-1150: refactor of the payments refund flow",
            "description": "A 900-line pull request that moves the refund logic into "
            "apps/payments/services.py, renames cancel_refund() and its siblings, and adds no "
            "tests yet.",
        },
        "expected": {"codeowners_payments", "maya_tests", "tom_pr_size", "service_naming"},
    },
    {
        "agent": "reviewer",
        "task": {
            "title": "Add a setting for the B2B order limit",
            "description": "B2B customers need a configurable maximum order value. Add the "
            "setting, enforce it in the B2B checkout, and write the commit the way this "
            "repository expects.",
        },
        "expected": {"settings_split", "commit_ticket", "legacy_php"},
    },
]
