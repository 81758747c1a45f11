"""`manage.py memory_demo`: load a realistic demo (3 projects, agents, runs, ~300 notes), once."""

from __future__ import annotations

import os
import random
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from memory_portal.memory import services
from memory_portal.memory.actors import Actor
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.models import (
    REASON_SUPERSEDED,
    REASON_VETOED,
    Agent,
    Application,
    AuditEvent,
    Kind,
    MemorySetting,
    Note,
    Project,
    Recovery,
    Repository,
    Role,
    Run,
    RunStatus,
    Scope,
    ScratchpadItem,
    Stage,
    Status,
    Target,
    ToolCallCount,
    Trust,
)

DEMO_USER = "demo"
VIEWER_USER = "viewer"
REPO_SLUG = "legacy-main"
DEMO_PROJECTS = ("acme-web", "payments-core", "legacy-erp")
LOGIN_URL = "http://127.0.0.1:8000/"
# A fixed seed: every load produces the same demo, so screenshots and walkthroughs stay valid.
SEED = 812

# Trace names of the v1 routes, as the API records them (memory_portal/api/v1.py url names);
# the tool names are SPEC §2.10's.
TRACE_V1_SAVE = "v1-save"
TRACE_V1_DAY = "v1-day"
TRACE_V1_ARCHIVE = "v1-archive"

S, F, R = RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.RUNNING

# --- The evidence repository ----------------------------------------------------------------

RECORDS_V1 = """\
# Shared record layouts used by the nightly ERP export.
# One record per line; fields are pipe-separated; amounts are in cents.

CUSTOMER|id|legal_name|vat_number|credit_limit_cents|region
ORDER|id|customer_id|placed_on(YYYYMMDD)|total_cents|status
INVOICE|id|order_id|issued_on(YYYYMMDD)|due_days|paid_flag(Y/N)

Order status codes: O=open, H=on hold, C=closed, X=cancelled (never reused).
Region codes are two letters; "ZZ" marks customers migrated from the 2009 system.
Dates before 1999 are stored as 00000000 and must be treated as unknown.
"""

RECORDS_V2 = """\
# Shared record layouts used by the nightly ERP export.
# One record per line; fields are pipe-separated; amounts are in cents.

CUSTOMER|id|legal_name|vat_number|credit_limit_cents|region
ORDER|id|customer_id|placed_on(YYYYMMDD)|total_cents|status
INVOICE|id|order_id|issued_on(YYYYMMDD)|due_days|paid_flag(Y/N/P)|currency
RETURN|id|invoice_id|returned_on(YYYYMMDD)|amount_cents

Order status codes: O=open, H=on hold, C=closed, X=cancelled (never reused), R=returned.
Region codes are two letters; "ZZ" marks customers migrated before 2012, awaiting cleanup.
Dates before 1999 are stored as 00000000 and must be treated as unknown.
"""

DEPLOY_V1 = """\
# Deploying legacy-main

1. Freeze check: no deploys between 01:00 and 04:00 UTC while the nightly export runs.
2. Build with `make dist`; the artefact lands in build/legacy-main.tar.gz.
3. Copy the artefact to the application server and run `scripts/deploy.sh --stage`.
4. Smoke test: open the invoice search and look up invoice 100001.
5. Promote with `scripts/deploy.sh --promote`; roll back with `--rollback` within 30 minutes.
"""

DEPLOY_V2 = """\
# Deploying legacy-main

1. Freeze check: no deploys between 01:00 and 04:00 UTC while the nightly export runs.
2. Build with `make dist`; the artefact lands in build/legacy-main.tar.gz.
3. Copy the artefact to the application server and run `scripts/deploy.sh --stage`.
4. Smoke test: run `scripts/smoke.sh`, which checks the invoice search and the export queue.
5. Promote with `scripts/deploy.sh --promote`; roll back with `--rollback` within 30 minutes.
6. Post in #erp-ops that the deploy is done, with the artefact version.
"""

CI_YML = """\
# CI for legacy-main: lint, unit tests, packaging.
stages: [lint, test, package]

unit:
  stage: test
  image: eclipse-temurin:8-jdk
  script:
    - make test

integration:
  stage: test
  # Needs the Oracle container; it is skipped on merge requests to keep them under 15 minutes.
  rules:
    - if: $CI_PIPELINE_SOURCE == "merge_request_event"
      when: never
  script:
    - make test-integration

package:
  stage: package
  script:
    - make dist
"""

README = """\
# legacy-main

The ERP core: order entry, invoicing and the nightly export to the warehouse.

Build locally with `make dist` (Java 8). Releases follow docs/deploy.md.
"""

CRONTAB = """\
# Nightly export to the warehouse; must finish before the warehouse import at 05:00 UTC.
0 1 * * * /opt/erp/bin/export-nightly.sh
30 4 * * * /opt/erp/bin/restart-report-server.sh
"""

SMOKE_SH = """\
#!/bin/sh
# Post-deploy smoke test: invoice search answers and the export queue is empty.
set -e
curl -fsS http://localhost:8080/invoices/search?q=100001 > /dev/null
test "$(/opt/erp/bin/export-queue-length)" -eq 0
"""

REPO_COMMITS = (
    (
        "Import legacy-main from the old Subversion repository",
        # Fixed dates and identity: the commits get the same SHAs on every load, so a failed or
        # reset load never leaves the database pointing at commits the folder no longer has.
        "2024-03-04T09:12:00+00:00",
        {
            "README.md": README,
            "src/shared/records.txt": RECORDS_V1,
            "docs/deploy.md": DEPLOY_V1,
            "config/ci.yml": CI_YML,
            "batch/crontab.txt": CRONTAB,
        },
    ),
    (
        "Add RETURN records and a smoke script; update the deploy steps",
        "2024-03-26T15:40:00+00:00",
        {
            "src/shared/records.txt": RECORDS_V2,
            "docs/deploy.md": DEPLOY_V2,
            "scripts/smoke.sh": SMOKE_SH,
        },
    ),
)

# Evidence-bound notes per project, written by its understand agent: (kind, content, path,
# quote); the quotes are exact text of the first commit.
EVIDENCE_NOTES = {
    "legacy-erp": (
        (
            "fact",
            "Order dates before 1999 are stored as 00000000 in the shared record layout; "
            "treat them as unknown, never as a real date.",
            "src/shared/records.txt",
            "Dates before 1999 are stored as 00000000 and must be treated as unknown.",
        ),
        (
            "fact",
            "Customers with region code ZZ were migrated from the 2009 system; the layout "
            "file says so explicitly.",
            "src/shared/records.txt",
            '"ZZ" marks customers migrated from the 2009 system.',
        ),
        (
            "navigation",
            "Invoice records are laid out as INVOICE|id|order_id|issued_on|due_days|paid_flag "
            "in src/shared/records.txt.",
            "src/shared/records.txt",
            "INVOICE|id|order_id|issued_on(YYYYMMDD)|due_days|paid_flag(Y/N)",
        ),
        (
            "lesson",
            "No deploys between 01:00 and 04:00 UTC: the nightly export runs then (step 1 of "
            "docs/deploy.md).",
            "docs/deploy.md",
            "no deploys between 01:00 and 04:00 UTC while the nightly export runs",
        ),
        (
            "fact",
            "The post-deploy smoke test looks up invoice 100001 in the invoice search.",
            "docs/deploy.md",
            "look up invoice 100001",
        ),
        (
            "fact",
            "CI skips the Oracle integration suite on merge requests; it runs on main only.",
            "config/ci.yml",
            "it is skipped on merge requests",
        ),
        (
            "navigation",
            "The README of legacy-main explains the local build (make dist, Java 8).",
            "README.md",
            None,
        ),
    ),
    "payments-core": (
        (
            "fact",
            "The legacy ERP export carries amounts in cents; the ledger import must not divide "
            "them by 100 again.",
            "src/shared/records.txt",
            "amounts are in cents",
        ),
        (
            "fact",
            "Legacy order status X means cancelled and the code is never reused, so the ledger "
            "can map it permanently.",
            "src/shared/records.txt",
            "X=cancelled (never reused)",
        ),
    ),
}

# --- Note text: sentence templates per category, filled from each project's vocabulary ------
# Each template: (kind, content, summary, tags). {f0}… are the row's fields, {F0}… capitalised.

TEMPLATES: dict[str, tuple[tuple[str, str, str, tuple[str, ...]], ...]] = {
    "release": (
        (
            "fact",
            "{F0} works like this: {f1}. Keep in mind that {f2}.",
            "Runbook: {f0}",
            ("deploy",),
        ),
        ("lesson", "Before {f0}, remember that {f2}.", "Caveat when {f0}", ("deploy", "gotcha")),
        (
            "navigation",
            "For {f0}, {f1}; the full checklist is in docs/runbooks/release.md.",
            "Where the steps for {f0} are",
            ("deploy", "runbook"),
        ),
    ),
    "flaky": (
        (
            "lesson",
            "{F0} is flaky because {f2}. The fix is to {f3}.",
            "Flaky test: {f0}",
            ("flaky-test", "ci"),
        ),
        (
            "fact",
            "When {f0} fails on CI it is usually because {f2}; rerun it once before digging in.",
            "CI failure pattern",
            ("flaky-test",),
        ),
        (
            "navigation",
            "{F0} lives in {f1}; look there first when the nightly run flags it.",
            "Where {f0} lives",
            ("tests",),
        ),
    ),
    "api": (
        ("fact", "{F0} {f1}.", "API quirk: {f0}", ("api-quirk",)),
        (
            "lesson",
            "Do not trust {f0} blindly: it {f1}. {F2}.",
            "Handling {f0}",
            ("api-quirk", "integration"),
        ),
        (
            "decision",
            "Because {f0} {f1}, we decided that {f2}.",
            "Decision on {f0}",
            ("api-quirk", "decision"),
        ),
    ),
    "people": (
        (
            "fact",
            "{f0} owns {f1} and prefers {f2}.",
            "Working with {f0}",
            ("people", "preferences"),
        ),
        ("navigation", "Questions about {f1} go to {f0}.", "Contact for {f1}", ("people",)),
    ),
    "layout": (
        ("navigation", "{F0} lives in {f1}; {f2}.", "Where {f0} lives", ("codebase",)),
        ("fact", "In {f1}, {f2}.", "Layout of {f0}", ("codebase",)),
        (
            "lesson",
            "To understand {f0}, start reading at {f1}: {f2}.",
            "Reading order for {f0}",
            ("codebase", "onboarding"),
        ),
    ),
    "data": (
        ("fact", "In the {f0} table, {f1}.", "Data quirk in {f0}", ("data-quality", "sql")),
        ("lesson", "Data quirk in {f0}: {f1}, so {f2}.", "Querying {f0}", ("data-quality",)),
        (
            "decision",
            "Rule for every query on {f0}: {f2}.",
            "Query rule for {f0}",
            ("data-quality", "reporting"),
        ),
    ),
    "decisions": (
        (
            "decision",
            "Decision on {f0}: we {f1}, because {f2}.",
            "ADR: {f0}",
            ("adr", "decision"),
        ),
        ("fact", "Current convention for {f0}: {f1}.", "Convention: {f0}", ("convention",)),
        ("lesson", "Why we {f1}: {f2}.", "Background on {f0}", ("adr",)),
    ),
    "ops": (
        (
            "lesson",
            "When {f0}, the cause is usually that {f1}. Fix: {f2}.",
            "Incident pattern: {f0}",
            ("incident", "runbook"),
        ),
        ("fact", "Known cause of '{f0}': {f1}.", "Known cause", ("incident",)),
        ("navigation", "Runbook for when {f0}: {f2}.", "Runbook entry", ("runbook", "on-call")),
    ),
}

EXTRA_TAGS = {
    "release": ("release", "staging", "production"),
    "flaky": ("ci", "tests", "nightly"),
    "api": ("integration", "vendor"),
    "people": ("team",),
    "layout": ("navigation", "onboarding"),
    "data": ("reporting", "analytics"),
    "decisions": ("architecture",),
    "ops": ("on-call", "alerting"),
}

STEPS = ("explore", "plan", "implement", "verify", "summarise", "")

AGENT_ARCHIVE_REASONS = (
    "No longer true after the last release; the runbook has the current steps.",
    "Only mattered for the finished ticket.",
    "Duplicate of a project-wide note with more detail.",
)
PERSON_ARCHIVE_REASONS = (
    "Outdated: the team changed this process last sprint.",
    "Too specific to one incident to be useful later.",
    "Covered by the onboarding guide now.",
)

ACME = {
    "release": (
        (
            "deploying to staging",
            "run `make deploy-staging` from a clean main checkout",
            "it rebuilds the SSR bundle, so allow eight minutes before smoke testing",
        ),
        (
            "releasing to production",
            "start the Deploy Production workflow with the release tag",
            "it only runs from a green main build, and nobody releases after 16:00 on Fridays",
        ),
        (
            "opening a preview environment",
            "comment /preview on the pull request",
            "preview environments are deleted after 72 hours without a push",
        ),
        (
            "purging the CDN",
            "run `scripts/purge_cdn.sh --paths '/static/*'`",
            "a full purge takes about twenty minutes to settle in every edge location",
        ),
        (
            "upgrading checkout-api",
            "run the migrations job, then `helm upgrade checkout-api charts/checkout-api`",
            "the pods refuse to start while a migration is pending",
        ),
        (
            "restarting the search indexer",
            "run `kubectl rollout restart deploy/search-indexer`",
            "the indexer replays the last hour of product events after a restart",
        ),
    ),
    "flaky": (
        (
            "test_checkout_applies_coupon_once",
            "checkout_api/tests/test_coupons.py",
            "it depends on the wall clock crossing midnight in UTC",
            "freeze time with the frozen_clock fixture",
        ),
        (
            "the cart e2e spec 'keeps items after login'",
            "storefront/e2e/cart.spec.ts",
            "the login redirect sometimes races the cart merge request",
            "wait for the cart-merged event instead of a fixed timeout",
        ),
        (
            "test_search_suggestions_order",
            "services/search-indexer/tests/test_suggest.py",
            "Elasticsearch returns ties in shard order",
            "sort ties by product id in the assertion",
        ),
        (
            "the product gallery snapshot test",
            "storefront/src/components/Gallery.test.tsx",
            "web fonts load after the snapshot on slow CI runners",
            "await document.fonts.ready before taking the snapshot",
        ),
        (
            "test_order_confirmation_email",
            "checkout_api/tests/test_emails.py",
            "Celery eager mode leaks between tests when they run in parallel",
            "mark it serial so xdist keeps it on one worker",
        ),
        (
            "test_inventory_reservation_expiry",
            "checkout_api/tests/test_inventory.py",
            "the reservation TTL is 900 seconds and the test sleeps 899",
            "patch RESERVATION_TTL to two seconds in the test",
        ),
    ),
    "api": (
        (
            "the card processor's PaymentIntents API",
            "answers 3-D Secure challenges with decline code authentication_required "
            "instead of a distinct status",
            "checkout treats that code as 'needs action' and shows the challenge",
        ),
        (
            "the Algolia search API",
            "silently truncates records above 10 KB",
            "the indexer cuts long descriptions to 4,000 characters before upload",
        ),
        (
            "the ParcelHub shipping-rates API",
            "answers weights in grams but expects them in kilograms",
            "the conversion happens in checkout_api/shipping/parcelhub.py and nowhere else",
        ),
        (
            "the internal pricing service",
            "rounds half-even while the storefront used to round half-up",
            "the storefront always shows the price the pricing service returned",
        ),
        (
            "the Cloudinary image API",
            "caches transformations forever, so a changed crop needs a new public id",
            "the storefront appends the version suffix the CMS provides",
        ),
        (
            "the loyalty points API",
            "paginates with a cursor that expires after 60 seconds",
            "we fetch all pages in one go and never store the cursor",
        ),
    ),
    "people": (
        (
            "Priya Raman",
            "the storefront",
            "small pull requests with before and after screenshots",
        ),
        (
            "Jonas Weber",
            "checkout-api",
            "a failing test first for every bug fix and no mocks of the pricing service",
        ),
        (
            "Amara Okafor",
            "the release calendar",
            "release notes in the pull request description rather than in chat",
        ),
        ("Lucas Martin", "search relevance", "benchmarks attached to any ranking change"),
        ("Mei Chen", "accessibility", "axe checks run locally before a UI change goes to review"),
        (
            "Diego Santos",
            "the design system",
            "colours from the design system palette instead of hex values",
        ),
    ),
    "layout": (
        (
            "the checkout flow",
            "storefront/src/pages/checkout/",
            "CheckoutPage.tsx wires the steps together",
        ),
        (
            "the payment adapters",
            "checkout_api/payments/adapters/",
            "the registry in __init__.py picks one adapter per market",
        ),
        (
            "the feature flags",
            "storefront/src/flags/",
            "useFlag() reads the flags from the /api/flags endpoint once per page load",
        ),
        (
            "the order state machine",
            "checkout_api/orders/states.py",
            "every transition is declared in TRANSITIONS at the top of the file",
        ),
        (
            "search indexing",
            "services/search-indexer/indexer/",
            "main.py consumes the product-events topic",
        ),
        (
            "the email templates",
            "checkout_api/templates/emails/",
            "each HTML template has a .txt twin that must be kept in sync",
        ),
    ),
    "data": (
        (
            "orders",
            "orders created before 2021 have currency NULL and are all EUR",
            "reports must coalesce currency to EUR",
        ),
        (
            "products",
            "sku is unique per market, not globally",
            "join on (market, sku), never on sku alone",
        ),
        (
            "cart_items",
            "quantity is 0 for saved-for-later items",
            "filter on quantity > 0 when computing cart totals",
        ),
        (
            "customers",
            "email has been stored lower-cased only since 2022",
            "compare emails case-insensitively",
        ),
        (
            "coupons",
            "expires_on is an inclusive local date in the shop's timezone",
            "convert it to UTC end of day before comparing",
        ),
        (
            "inventory_events",
            "events can arrive up to five minutes out of order",
            "order by occurred_at, never by id",
        ),
    ),
    "decisions": (
        (
            "client state",
            "keep server state in React Query and dropped the Redux store",
            "two caches kept diverging after checkout",
        ),
        (
            "payment retries",
            "retry card authorisations at most once, and only on network errors",
            "a double charge costs more than a lost sale",
        ),
        (
            "image formats",
            "serve AVIF with a WebP fallback",
            "it cut product page weight by 38% in the trial",
        ),
        (
            "API versioning",
            "version checkout-api in the URL path (/v2/)",
            "the old mobile SDK cannot send custom headers",
        ),
        (
            "search relevance",
            "boost in-stock products instead of hiding out-of-stock ones",
            "hiding them hurt search traffic for seasonal items",
        ),
        (
            "test data",
            "build fixtures with factories instead of JSON dumps",
            "the dumps broke on every migration",
        ),
    ),
    "ops": (
        (
            "checkout returns 502 right after a deploy",
            "the new pods fail readiness until the price cache is warm",
            "wait for the warm-up job, or scale the old replica set back up",
        ),
        (
            "search results are stale",
            "the indexer consumer group fell behind after a Kafka rebalance",
            "restart the indexer; it resumes from the committed offset",
        ),
        (
            "order confirmation emails are late",
            "the email queue shares Celery workers with image resizing",
            "move the email queue to its dedicated worker pool",
        ),
        (
            "the storefront shows prices without VAT",
            "the market cookie is missing on the first request through some CDN edges",
            "fall back to the Accept-Language market mapping",
        ),
        (
            "CI runs out of disk",
            "Docker layer caches pile up on the self-hosted runner",
            "run the weekly prune job by hand from the runner dashboard",
        ),
        (
            "cart totals differ between web and app",
            "the app caches coupon rules for an hour",
            "bust the coupon cache whenever a rule changes",
        ),
    ),
}

PAYMENTS = {
    "release": (
        (
            "releasing the ledger",
            "pause the posting consumer, wait for zero lag, then run `make release-ledger`",
            "the ledger must be drained first or postings land twice",
        ),
        (
            "releasing payouts",
            "start the Payouts Release pipeline and get the finance approval",
            "nothing is released during the 10:00 to 11:00 UTC payout batch",
        ),
        (
            "promoting the fraud scorer",
            "run `argo rollouts promote fraud-scorer` once the canary is green",
            "the canary must run a full hour so the nightly model refresh is covered",
        ),
        (
            "deploying to staging",
            "run `make deploy ENV=staging`",
            "staging shares the bank sandbox with QA, so announce deploys in #payments-qa",
        ),
        (
            "running database migrations",
            "let the migrate job of the release pipeline run them",
            "each migration must stay backwards compatible for one release because payouts "
            "roll out slowly",
        ),
        (
            "changing the reconciliation jobs",
            "run `kubectl apply -k deploy/recon/overlays/prod`",
            "the CronJob keeps its old schedule until the running job finishes",
        ),
    ),
    "flaky": (
        (
            "test_settlement_cutoff",
            "ledger/tests/test_settlement.py",
            "it assumes the runner's timezone is UTC",
            "set TZ=UTC in the test environment",
        ),
        (
            "test_fx_rates_refresh",
            "ledger/tests/test_fx.py",
            "the recorded FX fixture rolls over at month end",
            "pin the fixture date with freezegun",
        ),
        (
            "the payouts integration suite",
            "payouts/tests/integration/",
            "the bank sandbox rate-limits parallel CI jobs",
            "run the suite on one worker with --maxfail=1",
        ),
        (
            "test_idempotency_key_reuse",
            "payouts/tests/test_idempotency.py",
            "two workers can generate the same key within one millisecond",
            "use the uuid7 helper instead of a timestamp",
        ),
        (
            "test_refund_partial_rounding",
            "ledger/tests/test_refunds.py",
            "the Decimal context precision leaks from another test",
            "use localcontext() in the rounding helper",
        ),
        (
            "the card processor contract tests",
            "contracts/processor/",
            "the mock server image updates itself from the latest tag",
            "pin the mock image digest in docker-compose.ci.yml",
        ),
    ),
    "api": (
        (
            "the bank's SEPA API",
            "accepts a payout twice if the end-to-end id differs only in case",
            "end-to-end ids are upper-cased before sending",
        ),
        (
            "the card processor's refund endpoint",
            "returns 200 with status pending even when the refund is rejected later",
            "we poll the refund until it is final before telling the customer",
        ),
        (
            "the FX rates provider",
            "publishes rates at 16:00 CET but timestamps them midnight UTC",
            "we store both the published time and the rate date",
        ),
        (
            "the KYC service",
            "times out after 30 seconds but keeps processing the check",
            "a retry first looks the check up by its reference",
        ),
        (
            "the webhook relay",
            "delivers events at least once and sometimes out of order",
            "intake dedupes on event id and compares sequence numbers",
        ),
        (
            "the accounting export API",
            "rejects amounts with more decimals than the currency has minor units",
            "amounts are formatted with the currency's minor units, zero for JPY",
        ),
    ),
    "people": (
        (
            "Sofia Lindqvist",
            "the ledger",
            "an ADR before any change to the journal schema",
        ),
        ("Omar Haddad", "payouts", "runbooks updated in the same pull request as the code"),
        (
            "Hannah Becker",
            "compliance reviews",
            "a data-retention note for every new table holding personal data",
        ),
        (
            "Kenji Watanabe",
            "the fraud models",
            "a week of shadow testing before any feature change goes live",
        ),
        ("Grace Mensah", "finance operations", "a day's notice before payout timing changes"),
        ("Tomás Silva", "the on-call rota", "alerts that link straight to a runbook section"),
    ),
    "layout": (
        (
            "double-entry posting",
            "ledger/posting/",
            "post_entries() in engine.py is the only writer of journal lines",
        ),
        (
            "payout batching",
            "payouts/batch/",
            "BatchBuilder groups payouts by currency and bank",
        ),
        (
            "money handling",
            "ledger/money.py",
            "Money keeps amounts as integers of minor units",
        ),
        (
            "reconciliation",
            "recon/",
            "matchers.py holds the rules, ordered from strictest to loosest",
        ),
        (
            "webhook intake",
            "payouts/webhooks/",
            "each provider has a verifier module and a parser module",
        ),
        (
            "the feature flags",
            "common/flags.yaml",
            "flags are read once at start-up, so a change needs a restart",
        ),
    ),
    "data": (
        (
            "journal_lines",
            "amounts are signed integers of minor units with debits positive",
            "never sum across currencies",
        ),
        (
            "payouts",
            "status 'sent' means handed to the bank, not received",
            "report on bank_confirmed_at instead",
        ),
        (
            "fx_rates",
            "weekend dates have no rows",
            "reports carry Friday's rate forward",
        ),
        (
            "merchants",
            "country is ISO alpha-2 except XK for Kosovo, which the bank does not accept",
            "map XK before building SEPA files",
        ),
        (
            "refunds",
            "legacy_payment_ref points at payments from the previous ledger schema",
            "join through the legacy mapping table",
        ),
        (
            "settlements",
            "settlement_date is the bank's business day, not the UTC date",
            "use the bank calendar helper for date arithmetic",
        ),
    ),
    "decisions": (
        (
            "money representation",
            "store money as integer minor units plus a currency code",
            "floats caused one-cent drifts in reconciliation",
        ),
        (
            "event publishing",
            "publish ledger events through a transactional outbox",
            "dual writes lost events during database failovers",
        ),
        (
            "idempotency",
            "require an idempotency key on every payout request",
            "client retries created duplicate payouts",
        ),
        (
            "the FX source",
            "keep a single FX provider and cache its rates per day",
            "mixing providers made reconciliation impossible",
        ),
        (
            "batch timing",
            "run payout batches hourly instead of twice a day",
            "merchants asked for faster settlement",
        ),
        (
            "schema ownership",
            "let only the ledger service write journal tables",
            "ad-hoc fixes broke the balance invariants",
        ),
    ),
    "ops": (
        (
            "a payout batch is stuck in 'building'",
            "a merchant with an invalid IBAN blocks the batch",
            "move the merchant to the manual queue and rebuild the batch",
        ),
        (
            "the ledger balance check fails at 02:00",
            "the FX revaluation job ran before the rates were published",
            "rerun the revaluation after 02:30",
        ),
        (
            "the webhook backlog grows",
            "the relay retries in a storm after a provider outage",
            "scale intake to six workers and let the backlog drain",
        ),
        (
            "reconciliation shows unmatched card settlements",
            "the processor split one settlement file into two",
            "merge the files with recon/tools/merge_files.py",
        ),
        (
            "refunds stay pending for days",
            "the processor's callback URL changed without notice",
            "re-register the callback in the processor dashboard",
        ),
        (
            "the fraud scorer answers slowly",
            "a deploy flushed the feature store cache",
            "warm the cache with the replay job before peak hours",
        ),
    ),
}

LEGACY = {
    "release": (
        (
            "deploying the ERP application server",
            "run `scripts/deploy.sh --stage`, then `--promote`",
            "deploys are frozen between 01:00 and 04:00 UTC for the nightly export",
        ),
        (
            "changing the batch schedule",
            "edit batch/crontab.txt and install it with `make install-cron`",
            "the export must finish before the warehouse import at 05:00 UTC",
        ),
        (
            "publishing report templates",
            "copy the .rpt files to the shared reports folder",
            "the report server caches templates until its nightly restart",
        ),
    ),
    "flaky": (
        (
            "InvoiceExportTest",
            "src/test/InvoiceExportTest.java",
            "it reads the system locale for decimal separators",
            "run the suite with -Duser.language=en",
        ),
        (
            "the Oracle integration suite",
            "src/test/integration/",
            "the database container takes four minutes to start on CI",
            "raise the start-up timeout to ten minutes",
        ),
        (
            "CustomerMergeTest",
            "src/test/CustomerMergeTest.java",
            "it depends on the row order of a query without ORDER BY",
            "add ORDER BY id to the merge query",
        ),
    ),
    "api": (
        (
            "the ERP SOAP API",
            "returns dates as DD.MM.YYYY strings in every locale",
            "dates are parsed with an explicit pattern, never the default parser",
        ),
        (
            "the warehouse import endpoint",
            "accepts at most 5,000 lines per file",
            "the nightly export is split into chunks",
        ),
        (
            "the tax calculation module",
            "rounds each invoice line instead of the total",
            "totals are compared with a tolerance of one cent per line",
        ),
    ),
    "people": (
        (
            "Walter Brandt",
            "the ERP core",
            "changes tested against a copy of the last month-end data",
        ),
        ("Ingrid Nilsen", "the nightly export", "a message in #erp-ops before batch changes"),
        (
            "Rafael Costa",
            "the modernisation plan",
            "one module migrated at a time, each behind a feature toggle",
        ),
    ),
    "layout": (
        (
            "the record layout",
            "src/shared/records.txt",
            "there is one line per record type with pipe-separated fields",
        ),
        ("the deploy procedure", "docs/deploy.md", "the numbered steps are the runbook"),
        (
            "the CI configuration",
            "config/ci.yml",
            "the integration stage needs the Oracle container",
        ),
    ),
    "data": (
        (
            "customers",
            "region ZZ marks customers migrated from an older system",
            "regional sales reports exclude ZZ",
        ),
        (
            "orders",
            "dates before 1999 are stored as 00000000",
            "treat them as unknown, not as year zero",
        ),
        (
            "invoices",
            "paid_flag is Y/N text and blank means not checked yet",
            "dunning counts blank as unpaid",
        ),
    ),
    "decisions": (
        (
            "modernisation",
            "strangle the ERP module by module behind an API facade",
            "a big-bang rewrite was estimated at two years",
        ),
        (
            "the export format",
            "keep the pipe-separated export until the warehouse migrates",
            "the warehouse parser cannot change this year",
        ),
        (
            "the Java version",
            "stay on Java 8 until the report engine is replaced",
            "the report engine does not run on newer JVMs",
        ),
    ),
    "ops": (
        (
            "the nightly export is late",
            "a month-end report holds locks on the invoice table",
            "end the report session after 03:00 and rerun it in the morning",
        ),
        (
            "the warehouse import rejects the file",
            "a customer name contains a pipe character",
            "escape pipes in names in the export and resend",
        ),
        (
            "the report server shows old numbers",
            "templates are cached since the last restart",
            "restart the report server after publishing templates",
        ),
    ),
}


@dataclass(frozen=True)
class Workflow:
    """One top-level run and its nested runs: (agent stage, parent index, final status)."""

    when: float  # days ago for past workflows; fraction of today so far for today's
    hour: int
    task_key: str
    runs: tuple[tuple[str, int | None, str], ...]
    today: bool = False
    evidence: bool = False


@dataclass(frozen=True)
class ProjectSpec:
    slug: str
    name: str
    apps: tuple[tuple[str, str], ...]
    agents: tuple[tuple[str, str, str], ...]  # (stage, name, application slug)
    vocabulary: dict
    pool_notes: int
    past: tuple[Workflow, ...]
    today: tuple[Workflow, ...]
    facts: tuple[str, ...]
    expiring_facts: tuple[str, ...]
    fact_revisions: tuple[tuple[str, str, str], ...]  # (agent stage, old text, new text)
    person_fact: tuple[str, str]  # (agent stage, text) saved by the demo user
    day_lines: tuple[str, ...] = ()
    scratchpad: tuple[str, ...] = ()
    repo_link_app: str = ""
    enabled_days_ago: int = 30
    edits: int = 1


def wf(days, hour, key, *runs, evidence=False) -> Workflow:
    return Workflow(when=days, hour=hour, task_key=key, runs=runs, evidence=evidence)


def today(fraction, key, *runs) -> Workflow:
    return Workflow(when=fraction, hour=0, task_key=key, runs=runs, today=True)


PROJECT_SPECS = (
    ProjectSpec(
        slug="acme-web",
        name="Acme Web Shop",
        apps=(("storefront", "Storefront"), ("checkout-api", "Checkout API")),
        agents=(
            ("assess", "Triage assessor", "storefront"),
            ("understand", "Codebase cartographer", "storefront"),
            ("design", "Checkout designer", "checkout-api"),
            ("implement", "Feature implementer", "storefront"),
            ("review", "Security reviewer", "checkout-api"),
            ("runtime", "On-call assistant", "checkout-api"),
        ),
        vocabulary=ACME,
        pool_notes=112,
        past=(
            wf(29, 9, "PIN-701", ("understand", None, S)),
            wf(27, 14, "PIN-706", ("design", None, S), ("understand", 0, S)),
            wf(24, 10, "PIN-719", ("assess", None, S)),
            wf(22, 16, "PIN-724", ("runtime", None, F)),
            wf(
                19,
                11,
                "PIN-738",
                ("design", None, S),
                ("implement", 0, S),
                ("review", 1, S),
            ),
            wf(16, 9, "PIN-745", ("understand", None, S)),
            wf(13, 15, "PIN-757", ("runtime", None, S), ("understand", 0, F)),
            wf(10, 10, "PIN-768", ("assess", None, S), ("design", 0, S)),
            wf(7, 13, "PIN-779", ("design", None, F)),
            wf(
                5,
                11,
                "PIN-790",
                ("runtime", None, S),
                ("implement", 0, S),
                ("review", 1, S),
            ),
            # The scheduled morning health check has no ticket.
            wf(3, 6, "", ("runtime", None, S)),
            wf(2, 10, "PIN-801", ("understand", None, S), ("assess", 0, S)),
        ),
        today=(
            today(0.15, "PIN-809", ("review", None, S)),
            today(0.25, "PIN-816", ("assess", None, F)),
            today(0.4, "PIN-812", ("runtime", None, R), ("understand", 0, S), ("implement", 0, R)),
            today(0.6, "PIN-815", ("design", None, R)),
        ),
        facts=(
            "Priya wants screenshots of both the desktop and the mobile layout in storefront "
            "pull requests.",
            "Run storefront unit tests with `pnpm test --filter storefront`; the root test "
            "command runs every package and takes 11 minutes.",
            "The checkout-api staging database is refreshed from an anonymised production "
            "snapshot every Monday at 06:00 UTC.",
            "PIN tickets labelled hotfix skip the design stage and go straight to implement.",
            "Jonas prefers British spelling (authorisation, colour) in checkout-api code and docs.",
            "The feature flag checkout_v2_address_form is on for 20% of German traffic only.",
            "The coupon service belongs to the marketing squad; file changes as MKT tickets.",
            "Staging checkout uses the card processor's test mode; its documented 3-D Secure "
            "test card triggers the challenge flow.",
            "The storefront build needs Node 20; Node 22 breaks the image optimiser plugin.",
            "Search synonyms are managed in the merchandising tool, not in the repository.",
            "Amara publishes the release calendar every Thursday; releases outside it need "
            "her approval.",
            "Product images wider than 4,000 px are rejected by the resizer with a generic 500.",
            "The mobile app pins checkout-api v2; v1 endpoints can go once the April app "
            "release reaches 95% adoption.",
            "VAT rates come from the tax service and are cached for 24 hours in Redis.",
            "Use the sale-banner flag, not a deploy, to switch the sale banner on and off.",
        ),
        expiring_facts=(
            "Code freeze for the spring sale: only hotfixes merge until the sale ends.",
            "The load test for the sale is scheduled; leave autoscaling settings alone until "
            "it has run.",
        ),
        fact_revisions=(
            (
                "runtime",
                "Staging deploys take about eight minutes end to end.",
                "Staging deploys take about twelve minutes end to end since the SSR bundle "
                "moved into the build step.",
            ),
            (
                "understand",
                "The product page LCP budget is 3 s on mobile.",
                "The product page LCP budget is 2.5 s on the mid-tier mobile profile, "
                "tightened in the last performance review.",
            ),
        ),
        person_fact=(
            "design",
            "Ask Mei for an accessibility review on any change to the checkout forms.",
        ),
        day_lines=(
            "Reproducing the coupon rounding issue on staging",
            "fact: checkout-api staging runs the card processor in test mode",
            "Read checkout_api/payments/adapters/ to trace the retry path",
            "learned: the price cache warm-up takes about four minutes after a deploy",
            "Blocked: waiting for Jonas to confirm the retry policy",
            "Opened a draft pull request with a failing test first",
            "Ran the storefront e2e suite twice; the cart spec flaked once",
            "Handed the change over to the security reviewer",
            "Lighthouse on the product page: LCP 2.3 s on the mid-tier mobile profile",
            "Asked Amara whether the fix can ship before the freeze",
            "Checked the order state machine for a missing refunded transition",
            "Wrote up the incident timeline for the 502s after yesterday's deploy",
        ),
        scratchpad=(
            "Reproduce the 502 on staging right after a deploy",
            "Check the readiness probe timeout in charts/checkout-api",
            "Ask Jonas whether the warm-up job can run before traffic shifts",
            "Draft the runbook update for the price cache warm-up",
            "Confirm the fix with a second deploy to staging",
        ),
        edits=2,
    ),
    ProjectSpec(
        slug="payments-core",
        name="Payments Core",
        apps=(("ledger", "Ledger"), ("payouts", "Payouts")),
        agents=(
            ("assess", "Incident assessor", "payouts"),
            ("understand", "Ledger analyst", "ledger"),
            ("design", "Payments architect", "ledger"),
            ("implement", "Migration implementer", "ledger"),
            ("review", "Code reviewer", "payouts"),
            ("runtime", "Payout runtime agent", "payouts"),
        ),
        vocabulary=PAYMENTS,
        pool_notes=96,
        past=(
            wf(28, 10, "PIN-703", ("understand", None, S), evidence=True),
            wf(26, 15, "PIN-711", ("assess", None, S), ("understand", 0, S)),
            # The first implementation attempt failed; the retry below it succeeded.
            wf(
                23,
                9,
                "PIN-727",
                ("design", None, S),
                ("implement", 0, F),
                ("implement", 0, S),
            ),
            wf(20, 14, "PIN-736", ("runtime", None, S)),
            wf(17, 11, "PIN-749", ("design", None, S), ("review", 0, S)),
            wf(14, 16, "PIN-752", ("assess", None, F)),
            wf(11, 10, "PIN-763", ("understand", None, S), ("design", 0, S)),
            wf(8, 13, "PIN-774", ("runtime", None, S), ("review", 0, F)),
            wf(4, 9, "PIN-795", ("design", None, S), ("understand", 0, S)),
            wf(1, 15, "PIN-806", ("runtime", None, S)),
        ),
        today=(
            # Scheduled triage, no ticket.
            today(0.2, "", ("assess", None, F)),
            today(0.35, "PIN-818", ("understand", None, S), ("design", 0, S)),
            today(0.5, "PIN-820", ("runtime", None, R), ("implement", 0, S)),
            today(0.7, "PIN-821", ("review", None, R)),
        ),
        facts=(
            "Sofia wants an ADR link in every ledger pull request that touches journal tables.",
            "Payout batches run hourly at minute 5; avoid deploying payouts between :00 and :15.",
            "The bank sandbox resets its state every night at 00:00 CET.",
            "Ledger amounts are integers of minor units; JPY has none, BHD has three.",
            "The recon dashboard lags the ledger by about 15 minutes.",
            "Omar leads the payouts on-call rota this quarter.",
            "The fraud scorer model is refreshed nightly at 01:30 UTC.",
            "Test merchants have ids starting with tm_; exclude them from production metrics.",
            "Refund webhooks can arrive before the refund API call has returned.",
            "Grace needs a day's notice for any change to payout timing.",
            "Payout files to the bank hold at most 10,000 transactions each.",
            "Hannah signs off every new table that stores personal data.",
        ),
        expiring_facts=(
            "Month-end close: ledger migrations are frozen for the last two business days.",
            "The review of last week's duplicate payout is pending; leave the idempotency "
            "code alone until it is done.",
        ),
        fact_revisions=(
            (
                "understand",
                "The recon job runs twice a day.",
                "The recon job runs every hour since payout batches moved to hourly.",
            ),
            (
                "runtime",
                "KYC checks time out after 20 seconds.",
                "KYC checks time out after 30 seconds, and the provider keeps processing, so "
                "look the check up before retrying.",
            ),
        ),
        person_fact=(
            "runtime",
            "Page Omar, not the general on-call, for anything touching payout files.",
        ),
        day_lines=(
            "Looking into the stuck payout batch from the 10:00 run",
            "fact: a merchant with an invalid IBAN blocks the whole batch",
            "Moved the merchant to the manual queue; rebuilding the batch",
            "learned: the bank sandbox rejects XK as a country code",
            "Checked the journal balance after the rebuild: balanced",
            "Waiting for Grace to confirm the payout timing change",
            "Read ledger/posting/engine.py to confirm the single-writer rule",
            "Compared FX rates for the weekend gap with Friday's values",
            "Drafted a migration plan for the refunds mapping table",
            "Raised the webhook intake workers to six during the backlog",
        ),
        scratchpad=(
            "Find which merchant blocks the 10:00 payout batch",
            "Move that merchant to the manual queue",
            "Rebuild the batch and check the journal balance",
            "Tell Grace that the batch went out late",
        ),
        repo_link_app="ledger",
        enabled_days_ago=29,
    ),
    ProjectSpec(
        slug="legacy-erp",
        name="Legacy ERP",
        apps=(("erp-core", "ERP core"), ("batch-jobs", "Batch jobs")),
        agents=(
            ("understand", "ERP archaeologist", "erp-core"),
            ("design", "Modernisation planner", "erp-core"),
            ("runtime", "Batch runtime agent", "batch-jobs"),
        ),
        vocabulary=LEGACY,
        pool_notes=30,
        past=(
            wf(27, 10, "PIN-702", ("understand", None, S), evidence=True),
            wf(24, 14, "PIN-713", ("design", None, S), ("understand", 0, S)),
            wf(18, 9, "PIN-731", ("runtime", None, F)),
            wf(12, 11, "PIN-748", ("understand", None, S), ("design", 0, S)),
            wf(8, 15, "PIN-770", ("runtime", None, S)),
        ),
        today=(),
        facts=(
            "The ERP test database is a copy of the last month-end, refreshed by Walter.",
            "The nightly export runs from 01:00 to about 03:30 UTC.",
            "Tell Ingrid in #erp-ops before any change to batch timing.",
            "The report server restarts nightly at 04:30 UTC.",
        ),
        expiring_facts=(),
        fact_revisions=(
            (
                "runtime",
                "The warehouse import accepts 2,000 lines per file.",
                "The warehouse import accepts 5,000 lines per file since its upgrade.",
            ),
        ),
        person_fact=(
            "understand",
            "Walter is the only person who may approve changes to the invoice tables.",
        ),
        scratchpad=(
            "List the record types the warehouse still reads",
            "Check which layout lines changed in the last export",
            "Write down the ZZ region rule for the modernisation plan",
        ),
        repo_link_app="erp-core",
        enabled_days_ago=28,
    ),
)
DISABLED_PROJECT = "legacy-erp"


@dataclass(frozen=True)
class NoteText:
    kind: str
    content: str
    summary: str
    tags: tuple[str, ...]
    category: str


@dataclass
class NoteMeta:
    """What the loader remembers of a note it wrote: when, by which run, and what it is."""

    pk: str
    when: datetime
    run: Run
    kind: str
    evidence: bool = False
    v1: bool = False  # a private agent fact saved through /api/v1
    expiring: bool = False  # saved with an explicit expiry date


@dataclass
class ProjectState:
    spec: ProjectSpec
    project: Project
    apps: dict[str, Application] = field(default_factory=dict)
    agents: dict[str, Agent] = field(default_factory=dict)
    runs: list[Run] = field(default_factory=list)
    pool_notes: list[NoteMeta] = field(default_factory=list)
    facts: list[NoteMeta] = field(default_factory=list)
    evidence_notes: list[NoteMeta] = field(default_factory=list)


def _cap(text: str) -> str:
    """Capitalise a sentence start, but leave identifiers such as test_settlement_cutoff alone."""
    first = text.split(" ", 1)[0]
    if "_" in first or "/" in first or "." in first:
        return text
    return text[:1].upper() + text[1:]


def set_columns(model, fields: list[str], rows: list[tuple]) -> None:
    """Back-dating in bulk: `rows` are (value…, pk). One prepared UPDATE run with executemany is
    much faster than bulk_update's CASE expressions over hundreds of rows."""
    if not rows:
        return
    meta = model._meta
    qn = connection.ops.quote_name
    columns = ", ".join(f"{qn(meta.get_field(f).column)} = %s" for f in fields)
    sql = f"UPDATE {qn(meta.db_table)} SET {columns} WHERE {qn(meta.pk.column)} = %s"
    adapt = connection.ops.adapt_datetimefield_value
    params = [[adapt(v) for v in row[:-1]] + [row[-1]] for row in rows]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


def build_pool(vocabulary: dict, rng: random.Random) -> list[NoteText]:
    """Every template of a category filled with every row of the project's vocabulary."""
    pool: list[NoteText] = []
    seen: set[str] = set()
    for category, rows in vocabulary.items():
        for row in rows:
            values = {f"f{i}": v for i, v in enumerate(row)}
            values.update({f"F{i}": _cap(v) for i, v in enumerate(row)})
            for kind, content, summary, tags in TEMPLATES[category]:
                text = content.format(**values)
                if text in seen:
                    continue
                seen.add(text)
                pool.append(
                    NoteText(kind, text, _cap(summary.format(**values))[:240], tags, category)
                )
    rng.shuffle(pool)
    return pool


def build_repository(repo_dir: Path) -> tuple[str, str]:
    """A working git repository with two commits, built with the git binary; returns the two
    commit SHAs (the same on every build)."""
    if repo_dir.exists():
        shutil.rmtree(repo_dir)
    repo_dir.mkdir(parents=True)
    git = settings.MEMORY_PORTAL["GIT_BINARY"]
    # The developer's own git config (signing, hooks, templates) must not leak in.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="ERP Team",
        GIT_AUTHOR_EMAIL="erp-team@example.com",
        GIT_COMMITTER_NAME="ERP Team",
        GIT_COMMITTER_EMAIL="erp-team@example.com",
        GIT_TERMINAL_PROMPT="0",
    )

    def run_git(*args: str, date: str = "") -> str:
        extra = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date} if date else {}
        result = subprocess.run(
            [git, "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *args],
            cwd=repo_dir,
            env={**env, **extra},
            capture_output=True,
            check=False,
            timeout=30,
        )
        if result.returncode != 0:
            raise CommandError(f"git {args[0]} failed: {result.stderr.decode().strip()}")
        return result.stdout.decode().strip()

    run_git("init", "-q")
    shas = []
    for message, date, files in REPO_COMMITS:
        for name, text in files.items():
            target = repo_dir / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        run_git("add", "-A")
        run_git("commit", "-q", "-m", message, date=date)
        shas.append(run_git("rev-parse", "HEAD"))
    return shas[0], shas[1]


# --- The loader ------------------------------------------------------------------------------


class DemoLoader:
    """Builds the demo through the services, keeping a simulated clock per action; at the end it
    back-dates timestamps to that clock so the demo spans the last month."""

    def __init__(self, *, now: datetime, repo_dir: Path, demo, rng: random.Random):
        self.now = now
        self.midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
        self.repo_dir = repo_dir
        self.demo = demo
        self.as_demo = Actor.person(demo)
        self.rng = rng
        # Simulated times, applied in bulk by backdate().
        self.audit_marks: list[tuple[int, datetime]] = []
        self.note_times: dict[str, dict[str, datetime]] = {}
        self.default_expiry: set[str] = set()
        self.run_times: dict[str, list] = {}
        self.run_last: dict[str, datetime] = {}
        self.recovery_times: dict[str, datetime] = {}
        self.item_times: dict[str, datetime] = {}
        self.context_times: list[tuple[object, str, datetime]] = []
        self.setting_times: dict[int, datetime] = {}
        self.repository: Repository | None = None
        self.pool_rest: list[NoteText] = []
        self.commits: tuple[str, str] = ("", "")

    # -- simulated clock --

    def past(self, days: float, hour: int = 9, minute: int = 0) -> datetime:
        day = self.midnight - timedelta(days=int(days))
        return day.replace(hour=hour, minute=minute)

    def today_at(self, fraction: float) -> datetime:
        # Today's runs sit in the last two hours: day_append stamps each line with the real
        # clock's HH:MM, and the rows' times should not contradict their lines much.
        start = max(self.midnight, self.now - timedelta(hours=2))
        return start + (self.now - start) * fraction

    def clamp(self, when: datetime, limit: datetime | None = None) -> datetime:
        latest = min(limit or self.now, self.now) - timedelta(minutes=1)
        return min(when, latest)

    def at(self, when: datetime) -> None:
        """The audit events the next service call writes happened at `when`. Services insert
        their own audit rows (with plain SQL, so no signal tells), hence the id mark."""
        last = AuditEvent.objects.aggregate(last=Max("pk"))["last"] or 0
        self.audit_marks.append((last, when))

    def touch(self, pk: str, when: datetime, *, archived: bool = False) -> None:
        times = self.note_times.setdefault(pk, {"created_at": when})
        times["updated_at"] = max(when, times["created_at"])
        if archived:
            times["archived_at"] = times["updated_at"]

    def trace(self, run: Run, tool: str, when: datetime, outcome: str = "ok") -> None:
        services.run_call_consume(run=run)
        services.tool_call_record(run=run, tool=tool, outcome=outcome)
        self.run_last[run.pk] = max(when, self.run_last.get(run.pk, when))

    # -- setup --

    def setup_project(self, spec: ProjectSpec, index: int) -> ProjectState:
        created = self.past(33 - index, 9)
        self.at(created)
        project = services.project_create(actor=None, slug=spec.slug, name=spec.name)
        self.context_times.append((project, "created_at", created))
        state = ProjectState(spec=spec, project=project)
        for offset, (slug, name) in enumerate(spec.apps):
            when = created + timedelta(minutes=10 + offset)
            self.at(when)
            app = services.application_create(actor=None, project=project, slug=slug, name=name)
            self.context_times.append((app, "created_at", when))
            state.apps[slug] = app
        when = created + timedelta(minutes=20)
        self.at(when)
        services.membership_set(actor=None, project=project, user=self.demo, role=Role.MANAGER)
        for offset, (stage, name, app_slug) in enumerate(spec.agents):
            when = created + timedelta(hours=2, minutes=offset * 7)
            self.at(when)
            agent = services.agent_create(
                actor=None,
                project=project,
                name=name,
                stage=stage,
                application=state.apps[app_slug],
            )
            self.context_times.append((agent, "created_at", when))
            state.agents[stage] = agent
        when = self.past(spec.enabled_days_ago, 8, 30)
        self.at(when)
        services.memory_enable(actor=self.as_demo, project=project)
        self.setting_times[project.pk] = when
        if spec.repo_link_app:
            self.link_repository(state, when + timedelta(minutes=20))
        return state

    def link_repository(self, state: ProjectState, when: datetime) -> None:
        if self.repository is None:
            self.at(when)
            self.repository = services.repository_create(
                actor=None, slug=REPO_SLUG, path=str(self.repo_dir)
            )
            self.context_times.append((self.repository, "created_at", when))
        self.at(when)
        link = services.repository_link_set(
            actor=None,
            application=state.apps[state.spec.repo_link_app],
            repository=self.repository,
            revision=self.commits[0],
        )
        self.context_times.append((link, "updated_at", when))

    # -- runs and writes --

    def start_runs(self, state: ProjectState, workflow: Workflow, base: datetime) -> list[Run]:
        runs: list[Run] = []
        for position, (stage, parent_index, status) in enumerate(workflow.runs):
            when = base + timedelta(minutes=9 * position)
            parent = runs[parent_index] if parent_index is not None else None
            self.at(when)
            run = services.run_create(
                actor=None, agent=state.agents[stage], parent=parent, task_key=workflow.task_key
            )
            self.run_times[run.pk] = [when, None, status]
            self.run_last[run.pk] = when
            runs.append(run)
            state.runs.append(run)
        return runs

    def write(
        self,
        state: ProjectState,
        run: Run,
        when: datetime,
        text: NoteText,
        *,
        daily: bool = False,
        evidence: dict | None = None,
        expires_at: datetime | None = None,
    ) -> NoteMeta:
        rng = self.rng
        scope = Scope.APPLICATION if evidence or rng.random() < 0.4 else Scope.PROJECT
        tags = list(text.tags)
        if rng.random() < 0.5:
            tags.append(rng.choice(EXTRA_TAGS.get(text.category, ("notes",))))
        if scope == Scope.APPLICATION:
            tags.append(run.application.slug)
        self.at(when)
        # The orchestrator reports the step before the agent writes in it.
        step = rng.choice(STEPS)
        if run.current_step != step:
            run.current_step = services.run_update(actor=None, run=run, step=step).current_step
        result = services.note_write(
            actor=Actor.agent_run(run),
            kind=text.kind,
            content=text.content,
            target=Target.DAILY if daily else Target.LONG_TERM,
            scope=scope,
            summary=(text.summary or None) if rng.random() < 0.8 else None,
            tags=tags if rng.random() < 0.9 else None,
            day=when.date() if daily else None,
            evidence=evidence,
            expires_at=expires_at,
        )
        self.trace(run, "write", when)
        if not result.created:
            raise CommandError(f"Demo note text is not unique: {text.content[:60]}")
        self.touch(result.note.pk, when)
        return NoteMeta(
            pk=result.note.pk,
            when=when,
            run=run,
            kind=text.kind,
            evidence=evidence is not None,
        )

    def save_fact(
        self, run: Run, when: datetime, text: str, *, expires_in: int | None = None
    ) -> NoteMeta:
        self.at(when)
        expires_at = self.now + timedelta(days=expires_in) if expires_in else None
        result = services.fact_save(actor=Actor.agent_run(run), text=text, expires_at=expires_at)
        self.trace(run, TRACE_V1_SAVE, when)
        self.touch(result.note.pk, when)
        if expires_in is None:
            self.default_expiry.add(result.note.pk)
        return NoteMeta(
            pk=result.note.pk,
            when=when,
            run=run,
            kind=Kind.FACT,
            v1=True,
            expiring=expires_in is not None,
        )

    def run_past(self, state: ProjectState, pool: list[NoteText]) -> None:
        spec = state.spec
        workflows = [(w, self.past(w.when, w.hour, self.rng.randrange(0, 50))) for w in spec.past]
        writer_runs: list[tuple[Run, datetime, Workflow]] = []
        for workflow, base in workflows:
            runs = self.start_runs(state, workflow, base)
            for run in runs:
                agent = run.agent
                if agent.is_eligible and not agent.is_reviewer:
                    writer_runs.append((run, self.run_times[run.pk][0], workflow))
        clock = {run.pk: start + timedelta(minutes=2) for run, start, _ in writer_runs}

        def next_time(run: Run) -> datetime:
            when = clock[run.pk]
            clock[run.pk] = when + timedelta(minutes=self.rng.randint(2, 6))
            return when

        # Evidence first: the repository is linked at its first commit now.
        for run, _start, workflow in writer_runs:
            if not workflow.evidence or run.agent.stage != Stage.UNDERSTAND:
                continue
            for kind, content, path, quote in EVIDENCE_NOTES[spec.slug]:
                evidence = {"repositoryId": REPO_SLUG, "path": path}
                if quote:
                    evidence["quote"] = quote
                text = NoteText(kind, content, "", ("evidence", "legacy-main"), "layout")
                meta = self.write(state, run, next_time(run), text, evidence=evidence)
                state.evidence_notes.append(meta)
            break

        # Pool notes round-robin over the writing runs; a few facts get an explicit expiry.
        expiring_left = 3
        for index, text in enumerate(pool[: spec.pool_notes]):
            run, _start, _workflow = writer_runs[index % len(writer_runs)]
            when = next_time(run)
            expires_at = None
            if text.kind == Kind.FACT and expiring_left and self.rng.random() < 0.3:
                expiring_left -= 1
                expires_at = self.now + timedelta(days=self.rng.randint(20, 80))
            meta = self.write(
                state,
                run,
                when,
                text,
                daily=self.rng.random() < 0.15,
                expires_at=expires_at,
            )
            meta.expiring = expires_at is not None
            state.pool_notes.append(meta)

        # Private v1 facts of the agents, saved in their own runs.
        for index, text in enumerate(spec.facts):
            run, _start, _workflow = writer_runs[(index * 3 + 1) % len(writer_runs)]
            state.facts.append(self.save_fact(run, next_time(run), text))
        for index, text in enumerate(spec.expiring_facts):
            run, _start, _workflow = writer_runs[index]
            state.facts.append(self.save_fact(run, next_time(run), text, expires_in=21))

        # Fact revisions: saved in the agent's first run, superseded in its last past run.
        for stage, old_text, new_text in spec.fact_revisions:
            own = [(r, s) for r, s, _w in writer_runs if r.agent.stage == stage]
            first, last = own[0][0], own[-1][0]
            old = self.save_fact(first, next_time(first), old_text)
            when = next_time(last)
            self.at(when)
            result = services.fact_save(
                actor=Actor.agent_run(last), text=new_text, supersedes=old.pk
            )
            self.trace(last, TRACE_V1_SAVE, when)
            self.touch(result.note.pk, when)
            self.default_expiry.add(result.note.pk)
            self.touch(old.pk, when, archived=True)

        # A person saves a fact for an agent (v1 with agentId).
        stage, text = spec.person_fact
        when = self.past(9, 12, 5)
        self.at(when)
        result = services.fact_save(actor=self.as_demo, text=text, agent_id=state.agents[stage].pk)
        self.touch(result.note.pk, when)
        self.default_expiry.add(result.note.pk)

        # A finished workflow keeps its scratchpad: every item done.
        if spec.scratchpad:
            run, _start, _workflow = writer_runs[-1]
            for text in spec.scratchpad[:3]:
                self.scratch(run, next_time(run), text, done_after=timedelta(minutes=25))

        self.pool_rest = pool[spec.pool_notes :]

    def scratch(
        self, run: Run, when: datetime, text: str, *, done_after: timedelta | None = None
    ) -> None:
        actor = Actor.agent_run(run)
        self.at(when)
        item = services.scratchpad_add(actor=actor, text=text)
        self.trace(run, "scratchpad", when)
        self.item_times[item.pk] = when
        if done_after is not None:
            done = self.clamp(when + done_after)
            self.at(done)
            services.scratchpad_done(actor=actor, item_id=item.pk)
            self.trace(run, "scratchpad", done)
            self.item_times[item.pk + ":done"] = done

    def run_today(self, state: ProjectState) -> None:
        spec = state.spec
        lines = list(spec.day_lines)
        line_index = 0
        daily_left = 2
        for workflow in spec.today:
            base = self.today_at(workflow.when)
            runs = self.start_runs(state, workflow, base)
            for run in runs:
                when = self.run_times[run.pk][0] + timedelta(minutes=1)
                actor = Actor.agent_run(run)
                agent = run.agent
                if not agent.is_eligible or agent.is_reviewer:
                    # Ineligible and reviewer agents are refused writes; the trace shows it.
                    self.refused_write(run, when)
                    continue
                for _ in range(self.rng.randint(3, 5)):
                    when = self.clamp(when + timedelta(minutes=self.rng.randint(3, 12)))
                    self.at(when)
                    row = services.day_append(actor=actor, line=lines[line_index % len(lines)])
                    line_index += 1
                    self.trace(run, TRACE_V1_DAY, when)
                    self.touch(row.pk, when)
                if daily_left and self.pool_rest:
                    daily_left -= 1
                    state.pool_notes.append(
                        self.write(state, run, when, self.pool_rest.pop(), daily=True)
                    )
            top = runs[0]
            if workflow.runs[0][2] == R and spec.scratchpad and not top.agent.is_reviewer:
                # The live workflow's shared scratchpad: the top run and a nested step add items.
                writer = next(
                    (r for r in runs[1:] if r.agent.is_eligible and not r.agent.is_reviewer), top
                )
                for index, text in enumerate(spec.scratchpad):
                    when = self.clamp(self.run_times[top.pk][0] + timedelta(minutes=3 + index))
                    by = writer if index == len(spec.scratchpad) - 1 else top
                    done = timedelta(minutes=15) if index < 2 else None
                    self.scratch(by, when, text, done_after=done)

    def refused_write(self, run: Run, when: datetime) -> None:
        text = f"{run.agent.name} tried to write a note during {run.task_key or 'a run'}."
        try:
            services.note_write(actor=Actor.agent_run(run), kind=Kind.FACT, content=text)
        except MemoryPortalError as error:
            self.trace(run, "write", when, outcome=error.code)
        else:
            raise CommandError(f"{run.agent.name} was allowed to write; the demo expects not.")

    # -- later actions --

    def later_run(self, state: ProjectState, meta: NoteMeta) -> Run | None:
        """A later run of the same agent, for agent actions on its own notes."""
        candidates = [
            r
            for r in state.runs
            if r.agent_id == meta.run.agent_id and self.run_times[r.pk][0] > meta.when
        ]
        return candidates[0] if candidates else None

    def person_time(self, meta: NoteMeta, limit: datetime | None) -> datetime:
        delay = timedelta(hours=self.rng.randint(2, 72), minutes=self.rng.randint(0, 59))
        when = self.clamp(meta.when + delay, limit)
        return max(when, meta.when + timedelta(minutes=1))

    def curate(self, state: ProjectState, limit: datetime | None) -> None:
        """What agents and people did with the notes afterwards."""
        rng = self.rng
        spec = state.spec
        candidates = [m for m in state.pool_notes if not m.evidence and m.when < self.midnight]
        rng.shuffle(candidates)
        total = len(candidates)

        def take(count: int) -> list[NoteMeta]:
            taken = candidates[:count]
            del candidates[:count]
            return taken

        # Agents tidy their own notes in a later run: archive with a reason, or forget.
        agent_archive, agent_forget = [], []
        for meta in list(candidates):
            if len(agent_archive) >= 2 and len(agent_forget) >= (3 if total > 50 else 1):
                break
            run = self.later_run(state, meta)
            if run is None:
                continue
            candidates.remove(meta)
            (agent_archive if len(agent_archive) < 2 else agent_forget).append((meta, run))
        for index, (meta, run) in enumerate(agent_archive):
            when = self.clamp(self.run_times[run.pk][0] + timedelta(minutes=4))
            self.at(when)
            services.note_archive(
                actor=Actor.agent_run(run),
                note_id=meta.pk,
                reason=AGENT_ARCHIVE_REASONS[index % len(AGENT_ARCHIVE_REASONS)],
            )
            self.trace(run, TRACE_V1_ARCHIVE, when)
            self.touch(meta.pk, when, archived=True)
        agent_recoveries = []
        for meta, run in agent_forget:
            when = self.clamp(self.run_times[run.pk][0] + timedelta(minutes=6))
            self.at(when)
            recovery = services.note_forget(actor=Actor.agent_run(run), note_id=meta.pk)
            self.trace(run, "forget", when)
            self.touch(meta.pk, when)
            self.recovery_times[recovery.pk] = when
            agent_recoveries.append((recovery, run, when))

        # People: approve, reject, veto, archive, forget, edit.
        approved = take(round(total * 0.32))
        rejected = take(max(2, round(total * 0.045)))
        vetoed = take(max(1, round(total * 0.035)))
        archived = take(max(1, round(total * 0.025)))
        forgotten = take(max(2, round(total * 0.03)))
        edited = take(spec.edits)
        plain_facts = [m for m in state.facts if not m.expiring]
        approved += plain_facts[:3] + state.evidence_notes[:2]

        def act(meta: NoteMeta, service, **kwargs):
            when = self.person_time(meta, limit)
            self.at(when)
            result = service(actor=self.as_demo, note_id=meta.pk, **kwargs)
            return when, result

        for meta in approved:
            when, _ = act(meta, services.note_approve)
            self.touch(meta.pk, when)
        for meta in rejected:
            when, _ = act(meta, services.note_reject)
            self.touch(meta.pk, when)
        for meta in vetoed:
            when, _ = act(meta, services.note_veto)
            self.touch(meta.pk, when, archived=True)
        for index, meta in enumerate(archived):
            reason = PERSON_ARCHIVE_REASONS[index % len(PERSON_ARCHIVE_REASONS)]
            when, _ = act(meta, services.note_archive, reason=reason)
            self.touch(meta.pk, when, archived=True)
        manager_recoveries = []
        for meta in forgotten:
            when, recovery = act(meta, services.note_forget)
            self.touch(meta.pk, when)
            self.recovery_times[recovery.pk] = when
            manager_recoveries.append((recovery, meta, when))
        for meta in edited:
            when = self.person_time(meta, limit)
            note = Note.objects.only("content").get(pk=meta.pk)
            content = (
                f"{note.content} Checked by {self.demo.get_username()} in review on "
                f"{when:%d %b}: still accurate."
            )
            self.at(when)
            result = services.note_edit(actor=self.as_demo, note_id=meta.pk, content=content)
            self.touch(result.note.pk, when)
            self.touch(meta.pk, when, archived=True)

        # A reviewed note is later forgotten by a manager (agents cannot: trust-locked).
        if approved and spec.slug == "acme-web":
            meta = approved[0]
            when = self.clamp(self.note_times[meta.pk]["updated_at"] + timedelta(days=1), limit)
            self.at(when)
            recovery = services.note_forget(actor=self.as_demo, note_id=meta.pk)
            self.touch(meta.pk, when)
            self.recovery_times[recovery.pk] = when
            # An agent that tries the same on another reviewed note is refused.
            other = next((m for m in approved[1:] if not m.v1 and not m.evidence), None)
            runner = other and self.later_run(state, other)
            if runner is not None:
                try:
                    services.note_forget(actor=Actor.agent_run(runner), note_id=other.pk)
                except MemoryPortalError as error:
                    self.trace(runner, "forget", self.run_times[runner.pk][0], error.code)

        # One veto is undone by a person, and one forgotten note is restored.
        if spec.slug == "acme-web" and candidates:
            meta = candidates.pop(0)
            when, _ = act(meta, services.note_veto)
            self.touch(meta.pk, when, archived=True)
            undo = self.clamp(when + timedelta(hours=2), limit)
            self.at(undo)
            services.note_undo(actor=self.as_demo, note_id=meta.pk)
            self.note_times[meta.pk]["updated_at"] = undo
            self.note_times[meta.pk].pop("archived_at", None)
        if manager_recoveries and spec.slug == "acme-web":
            recovery, meta, forgot = manager_recoveries[-1]
            when = self.clamp(forgot + timedelta(hours=20), limit)
            self.at(when)
            services.note_restore(actor=self.as_demo, recovery_id=recovery.pk)
            self.touch(meta.pk, when)
        if agent_recoveries and spec.slug == "payments-core":
            # An agent restores its own forgotten note in a later run ("also in later runs").
            recovery, run, forgot = agent_recoveries[0]
            later = next(
                (
                    r
                    for r in state.runs
                    if r.agent_id == run.agent_id and self.run_times[r.pk][0] > forgot
                ),
                None,
            )
            if later is not None:
                when = self.clamp(self.run_times[later.pk][0] + timedelta(minutes=8))
                self.at(when)
                note = services.note_restore(actor=Actor.agent_run(later), recovery_id=recovery.pk)
                self.trace(later, "restore", when)
                self.touch(note.pk, when)

        # Facts: one rejected, one vetoed, one forgotten by a manager.
        for meta, service in zip(
            plain_facts[3:],
            (services.note_reject, services.note_veto, services.note_forget),
            strict=False,
        ):
            when, result = act(meta, service)
            self.touch(meta.pk, when, archived=service is services.note_veto)
            if isinstance(result, Recovery):
                self.recovery_times[result.pk] = when

    def expire(self, state: ProjectState) -> None:
        """Some facts have run past their expiry date (back-dated; services refuse past dates)."""
        chosen = [m for m in state.facts if m.expiring]
        chosen += [m for m in state.pool_notes if m.expiring and m.when < self.past(8)][:1]
        for meta in chosen:
            created = self.note_times[meta.pk]["created_at"]
            span = min(timedelta(days=14), (self.now - created) * 0.6)
            self.note_times[meta.pk]["expires_at"] = created + span

    def finish_runs(self, state: ProjectState) -> None:
        # Children finish before their parents; running runs stay open.
        for run in reversed(state.runs):
            start, _end, status = self.run_times[run.pk]
            if status == RunStatus.RUNNING:
                continue
            end = max(
                [self.run_last.get(run.pk, start)]
                + [self.run_times[c.pk][1] or start for c in state.runs if c.parent_id == run.pk]
            )
            end = self.clamp(end + timedelta(minutes=self.rng.randint(3, 15)))
            self.run_times[run.pk][1] = end
            self.at(end)
            services.run_update(actor=None, run=run, status=status)

    def finish_legacy(self, state: ProjectState) -> None:
        """Re-pin the link to the second commit (evidence goes stale), re-verify one note whose
        file did not change, then switch memory off."""
        app = state.apps[state.spec.repo_link_app]
        when = self.past(6, 10)
        self.at(when)
        link = services.repository_link_set(
            actor=None, application=app, repository=self.repository, revision=self.commits[1]
        )
        self.context_times.append((link, "updated_at", when))
        ci_note = Note.objects.filter(
            pk__in=[m.pk for m in state.evidence_notes], evidence_path="config/ci.yml"
        ).first()
        if ci_note is not None:
            when = self.past(5, 14)
            self.at(when)
            services.note_reverify(actor=self.as_demo, note_id=ci_note.pk)
            self.touch(ci_note.pk, when)
        when = self.past(4, 9, 15)
        self.at(when)
        services.memory_disable(actor=self.as_demo, project=state.project)
        self.setting_times[state.project.pk] = when

    # -- back-dating --

    def backdate(self, projects: list[Project]) -> None:
        """Back-dating for realism, the only direct model writes of the demo: the services stamp
        everything "now"; this spreads notes, audit events, runs, recoveries, scratchpad items
        and context objects over the last month, by the simulated clock kept above."""
        marks = self.audit_marks
        rows, mark = [], 0
        if marks:
            events = AuditEvent.objects.filter(pk__gt=marks[0][0]).order_by("pk")
            for pk in events.values_list("pk", flat=True):
                # Event ids grow with time: an event belongs to the last mark below its id.
                while mark + 1 < len(marks) and marks[mark + 1][0] < pk:
                    mark += 1
                rows.append((marks[mark][1], pk))
        set_columns(AuditEvent, ["created_at"], rows)

        rows = []
        default_days = timedelta(days=settings.MEMORY_PORTAL["FACT_DEFAULT_EXPIRY_DAYS"])
        for pk, archived_at, expires_at in Note.objects.filter(
            pk__in=list(self.note_times)
        ).values_list("pk", "archived_at", "expires_at"):
            times = self.note_times[pk]
            created = times["created_at"]
            updated = times.get("updated_at", created)
            if archived_at is not None:
                archived_at = times.get("archived_at", updated)
            if "expires_at" in times:
                expires_at = times["expires_at"]
            elif pk in self.default_expiry and expires_at is not None:
                expires_at = created + default_days
            rows.append((created, updated, archived_at, expires_at, pk))
        set_columns(Note, ["created_at", "updated_at", "archived_at", "expires_at"], rows)

        runs = list(Run.objects.filter(pk__in=self.run_times))
        for run in runs:
            run.started_at, run.finished_at, _status = self.run_times[run.pk]
        Run.objects.bulk_update(runs, ["started_at", "finished_at"], batch_size=300)
        counts = list(ToolCallCount.objects.filter(run__in=runs))
        for count in counts:
            count.last_called_at = self.run_last.get(count.run_id, count.last_called_at)
        ToolCallCount.objects.bulk_update(counts, ["last_called_at"], batch_size=300)

        recoveries = list(Recovery.objects.filter(pk__in=self.recovery_times))
        for recovery in recoveries:
            recovery.created_at = self.recovery_times[recovery.pk]
        Recovery.objects.bulk_update(recoveries, ["created_at"])

        items = list(ScratchpadItem.objects.filter(project__in=projects))
        for item in items:
            item.created_at = self.item_times.get(item.pk, item.created_at)
            item.updated_at = self.item_times.get(item.pk + ":done", item.created_at)
        ScratchpadItem.objects.bulk_update(items, ["created_at", "updated_at"])

        for obj, field_name, when in self.context_times:
            type(obj).objects.filter(pk=obj.pk).update(**{field_name: when})
        for project in projects:
            last_write = self.latest_write(project)
            MemorySetting.objects.filter(project=project).update(
                changed_at=self.setting_times.get(project.pk), last_write_at=last_write
            )

    def latest_write(self, project: Project) -> datetime | None:
        return Note.objects.filter(project=project).aggregate(last=Max("created_at"))["last"]

    # -- everything --

    def load(self) -> list[Project]:
        self.commits = build_repository(self.repo_dir)
        states = []
        for index, spec in enumerate(PROJECT_SPECS):
            state = self.setup_project(spec, index)
            if spec.slug == "acme-web":
                viewer = get_user_model().objects.get(username=VIEWER_USER)
                self.at(self.past(20, 11))
                services.membership_set(
                    actor=None, project=state.project, user=viewer, role=Role.MEMBER
                )
            pool = build_pool(spec.vocabulary, self.rng)
            if len(pool) < spec.pool_notes + 2:
                raise CommandError(f"Not enough demo text for {spec.slug}.")
            self.run_past(state, pool)
            self.run_today(state)
            limit = self.past(4, 9) if spec.slug == DISABLED_PROJECT else None
            self.curate(state, limit)
            self.expire(state)
            self.finish_runs(state)
            if spec.slug == DISABLED_PROJECT:
                self.finish_legacy(state)
            states.append(state)
        projects = [s.project for s in states]
        self.backdate(projects)
        return projects


# --- The command ----------------------------------------------------------------------------


class Command(BaseCommand):
    help = (
        "Load a realistic demo (projects acme-web, payments-core and legacy-erp, agents, runs, "
        "~300 notes, a git repository for evidence) and a dashboard login. Idempotent; "
        "--reset deletes the demo first."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--reset",
            action="store_true",
            help="Delete the demo projects, repository, agents and demo users, then load again.",
        )

    def handle(self, *args, reset: bool = False, **options):
        started = time.monotonic()
        repo_dir = Path(settings.VAR_DIR) / "demo-repos" / REPO_SLUG
        existing = set(
            Project.objects.filter(slug__in=DEMO_PROJECTS).values_list("slug", flat=True)
        )
        if not reset and existing == set(DEMO_PROJECTS):
            self.stdout.write(
                "The demo is already loaded; nothing changed. The login is unchanged "
                f"(user: {DEMO_USER}, password as printed when it was created). "
                "Use --reset to load it again."
            )
            self.repair_repository(repo_dir)
            self.summary(started)
            return
        if not reset and (existing or Repository.objects.filter(slug=REPO_SLUG).exists()):
            raise CommandError(
                f"Part of the demo exists ({', '.join(sorted(existing)) or REPO_SLUG}); "
                "run `manage.py memory_demo --reset` to replace it."
            )
        with transaction.atomic():
            if reset:
                self.delete_demo()
            password, created = self.users()
            loader = DemoLoader(
                now=timezone.now(),
                repo_dir=repo_dir,
                demo=get_user_model().objects.get(username=DEMO_USER),
                rng=random.Random(SEED),
            )
            loader.load()
        if DEMO_USER in created:
            self.stdout.write(
                f"Dashboard login: {LOGIN_URL}  user: {DEMO_USER}  password: {password}"
            )
        else:
            self.stdout.write(
                f"User {DEMO_USER} already existed; its password is unchanged ({LOGIN_URL})."
            )
        if VIEWER_USER in created:
            login = "the same password" if DEMO_USER in created else f"password: {password}"
            self.stdout.write(f"User {VIEWER_USER} (plain member of acme-web): {login}")
        self.summary(started)

    def repair_repository(self, repo_dir: Path) -> None:
        """The git folder lives outside the database (var/ may have been cleaned): rebuild it
        when it is gone. Its commits are deterministic, so the stored evidence still matches."""
        registered = Repository.objects.filter(slug=REPO_SLUG, path=str(repo_dir)).exists()
        if registered and not (repo_dir / ".git").is_dir():
            build_repository(repo_dir)
            self.stdout.write(f"Rebuilt the demo git repository at {repo_dir}.")

    def delete_demo(self) -> None:
        """--reset: the demo's projects (cascading to applications, agents, runs, notes,
        recoveries and scratchpads), its repository, its audit trail and its users."""
        Project.objects.filter(slug__in=DEMO_PROJECTS).delete()
        Repository.objects.filter(slug=REPO_SLUG).delete()
        # The demo's synthetic history goes with it; left behind it would show in the global
        # audit log as events of projects that no longer exist.
        AuditEvent.objects.filter(
            Q(project_ref__in=DEMO_PROJECTS) | Q(project__isnull=True, target_ref=REPO_SLUG)
        ).delete()
        get_user_model().objects.filter(username__in=[DEMO_USER, VIEWER_USER]).delete()
        self.stdout.write("Deleted the previous demo.")

    def users(self) -> tuple[str, set[str]]:
        """The demo manager and the viewer; returns (password, usernames created now)."""
        User = get_user_model()
        password = os.environ.get("DEMO_PASSWORD") or secrets.token_urlsafe(12)
        missing = {DEMO_USER, VIEWER_USER} - set(
            User.objects.filter(username__in=[DEMO_USER, VIEWER_USER]).values_list(
                "username", flat=True
            )
        )
        if missing:
            # One deliberately slow hash for both users: the viewer shares the demo password.
            hashed = make_password(password)
            for username in sorted(missing):
                User.objects.create(
                    username=username, email=f"{username}@example.com", password=hashed
                )
        return password, missing

    def summary(self, started: float) -> None:
        projects = Project.objects.filter(slug__in=DEMO_PROJECTS).order_by("slug")
        notes = Note.objects.filter(project__in=projects)
        runs = Run.objects.filter(project__in=projects)
        agents = Agent.objects.filter(project__in=projects)
        now = timezone.now()
        write = self.stdout.write

        parts = []
        for project in projects.select_related("memory_setting").annotate(
            apps=Count("applications", distinct=True)
        ):
            state = "on" if project.memory_setting.enabled else "off"
            parts.append(f"{project.slug} (memory {state}, {project.apps} applications)")
        write(f"Projects: {', '.join(parts)}")
        stages = dict(agents.values_list("stage").annotate(n=Count("id")))
        reviewers = sum(1 for a in agents if a.is_reviewer)
        write(
            f"Agents: {agents.count()} ("
            + ", ".join(f"{s} {stages.get(s, 0)}" for s in Stage.values)
            + f"; reviewers {reviewers})"
        )
        statuses = dict(runs.values_list("status").annotate(n=Count("id")))
        nested = runs.filter(parent__isnull=False).count()
        write(
            f"Runs: {runs.count()} ("
            + ", ".join(f"{s} {statuses.get(s, 0)}" for s in RunStatus.values)
            + f"; nested {nested})"
        )
        by_status = dict(notes.values_list("status").annotate(n=Count("id")))
        by_trust = dict(notes.values_list("trust").annotate(n=Count("id")))
        write(
            f"Notes: {notes.count()}; status: "
            + ", ".join(f"{s} {by_status.get(s, 0)}" for s in Status.values)
            + "; trust: "
            + ", ".join(f"{t} {by_trust.get(t, 0)}" for t in Trust.values)
        )
        write(
            "  vetoed {}, superseded {}, expired {}, evidence-bound {}, day rows {}".format(
                notes.filter(status=Status.ARCHIVED, archive_reason=REASON_VETOED).count(),
                notes.filter(archive_reason=REASON_SUPERSEDED).count(),
                notes.filter(expires_at__lte=now).count(),
                notes.exclude(evidence_commit="").count(),
                notes.filter(kind=Kind.DAY).count(),
            )
        )
        items = ScratchpadItem.objects.filter(project__in=projects)
        write(
            f"Recoveries: {Recovery.objects.filter(project__in=projects).count()}; "
            f"scratchpad items: {items.count()} ({items.filter(done=True).count()} done); "
            f"audit events: {AuditEvent.objects.filter(project__in=projects).count()}"
        )
        write(f"Done in {time.monotonic() - started:.1f} s.")
