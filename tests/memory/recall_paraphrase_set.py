"""The paraphrase recall set (docs/RECALL.md, "The sets"): questions about the facts of
tests/memory/recall_set.py that say the same thing in other words.

Rules the labels follow:

- a question shares no word with any fact it expects beyond stop-words: no word, no stem, no
  synonym of the lexical scorer's map (`test_the_paraphrases_share_no_term_with_their_facts`
  checks it with `recall.terms()`); it names what the fact is about in other words ("the card
  processor" for Stripe, "the test cluster" for staging);
- some questions need two facts;
- recall is per agent, as in the main set;
- UNRELATED questions have nothing to do with any agent's facts and are checked against every
  agent: none may recall anything.

They were written before any scorer's figures on them were seen, and the labels were not
changed afterwards. Plain data: `memory_recall_eval` loads this file beside the main set.
"""

PARAPHRASES = [
    # --- release ---------------------------------------------------------------------------
    {
        "agent": "release",
        "query": "Shipping to the test cluster keeps stalling unless I'm connected through the "
        "company's private network. Why?",
        "expected": {"staging_vpn"},
    },
    {
        "agent": "release",
        "query": "Which weekdays and hours are we allowed to push changes live to customers?",
        "expected": {"prod_window"},
    },
    {
        "agent": "release",
        "query": "What has to happen to the DB structure ahead of swapping the application "
        "containers, so they stop restarting endlessly?",
        "expected": {"migrations_first"},
    },
    {
        "agent": "release",
        "query": "How do I return the shop to its previous good version after a bad push? "
        "Would undoing the git change be enough?",
        "expected": {"rollback"},
    },
    {
        "agent": "release",
        "query": "Visitors still get outdated scripts for a whole day after we ship UI changes; "
        "what needs clearing?",
        "expected": {"cdn_purge"},
    },
    {
        "agent": "release",
        "query": "Where do we control the switches that hide unfinished payment-page "
        "functionality, and when do they get enabled for shoppers?",
        "expected": {"feature_flags"},
    },
    {
        "agent": "release",
        "query": "Where are the passwords and keys for the test environment kept, and can I "
        "write them into the chart overrides?",
        "expected": {"staging_secrets"},
    },
    {
        "agent": "release",
        "query": "How do we gradually expose a new build to a slice of users, and which graphs "
        "should I look at before going all in?",
        "expected": {"canary"},
    },
    {
        "agent": "release",
        "query": "Why is packaging the container occasionally four times slower than usual?",
        "expected": {"docker_cache"},
    },
    {
        "agent": "release",
        "query": "Who is the reliability engineer to alert when the shop is down, and how do "
        "I reach them?",
        "expected": {"oncall"},
    },
    {
        "agent": "release",
        "query": "At what hour is the database copied for safekeeping, and when should big "
        "structural changes be avoided?",
        "expected": {"db_backup"},
    },
    {
        "agent": "release",
        "query": "Why did the test purchases I placed on the rehearsal environment disappear "
        "after Sunday?",
        "expected": {"staging_reset"},
    },
    {
        "agent": "release",
        "query": "Our build pipeline can no longer upload containers and gets a permissions "
        "error; what credential lapsed?",
        "expected": {"image_registry"},
    },
    {
        "agent": "release",
        "query": "Why would fresh containers stay out of the load balancer while the cache "
        "server is offline?",
        "expected": {"readiness_redis"},
    },
    {
        "agent": "release",
        "query": "Where do I document user-visible changes ahead of tagging?",
        "expected": {"changelog"},
    },
    {
        "agent": "release",
        "query": "I edited a background job definition, yet the queue consumers still behave "
        "as before. What's missing?",
        "expected": {"celery_restart"},
    },
    {
        "agent": "release",
        "query": "What must be prepared in advance before pointing the website's hostname at "
        "another ingress?",
        "expected": {"dns_ttl"},
    },
    {
        "agent": "release",
        "query": "Where can I find older output from the live service when the container's "
        "history is truncated?",
        "expected": {"prod_logs"},
    },
    {
        "agent": "release",
        "query": "What must be in place before a risky structural database upgrade reaches "
        "customers?",
        "expected": {"migrations_first", "db_backup"},
    },
    {
        "agent": "release",
        "query": "A shop update is misbehaving for customers: whom do I alert, and how do I go "
        "back to the previous version?",
        "expected": {"oncall", "rollback"},
    },
    # --- ci --------------------------------------------------------------------------------
    {
        "agent": "ci",
        "query": "Why does the voucher spec go red only for jobs spanning the day boundary?",
        "expected": {"flaky_coupon"},
    },
    {
        "agent": "ci",
        "query": "Browser automation stalls on the build server with higher parallelism; "
        "what setting is safe?",
        "expected": {"playwright_workers"},
    },
    {
        "agent": "ci",
        "query": "Which database server release and plug-in are required to exercise our "
        "specs properly?",
        "expected": {"test_postgres"},
    },
    {
        "agent": "ci",
        "query": "How should I create sample records for unit checks, and what will the "
        "reviewer refuse?",
        "expected": {"factories"},
    },
    {
        "agent": "ci",
        "query": "After raising a library's version, the pipeline complains that a checksum "
        "doesn't match",
        "expected": {"pip_cache"},
    },
    {
        "agent": "ci",
        "query": "How can I get quicker feedback on my laptop instead of waiting a quarter "
        "hour for everything?",
        "expected": {"slow_marker"},
    },
    {
        "agent": "ci",
        "query": "How do I refresh the recorded expected output when a newsletter layout changes?",
        "expected": {"email_snapshots"},
    },
    {
        "agent": "ci",
        "query": "What service must be up on my machine for the basket specs, and how do I "
        "bring it up?",
        "expected": {"cart_redis"},
    },
    {
        "agent": "ci",
        "query": "The product lookup ordering spec is unreliable because updates land late. "
        "Is a pause acceptable?",
        "expected": {"flaky_search"},
    },
    {
        "agent": "ci",
        "query": "What proportion of the code I touched has to be exercised for the pipeline "
        "to go green?",
        "expected": {"diff_coverage"},
    },
    {
        "agent": "ci",
        "query": "Can my branch land while the overnight mutant-survival analysis is failing?",
        "expected": {"mutmut_nightly"},
    },
    {
        "agent": "ci",
        "query": "Comparisons of moments in time pass on my machine but not in the pipeline. "
        "What differs?",
        "expected": {"tz_assertions"},
    },
    {
        "agent": "ci",
        "query": "Why does the JavaScript bundling step crash from resource exhaustion on our "
        "pipeline machines?",
        "expected": {"runner_memory"},
    },
    {
        "agent": "ci",
        "query": "Should I just retry unstable specs automatically?",
        "expected": {"quarantine"},
    },
    {
        "agent": "ci",
        "query": "The linter on my laptop disagrees with the pipeline's. Which one wins?",
        "expected": {"ruff_pin"},
    },
    {
        "agent": "ci",
        "query": "Why are the billing-provider integration checks skipped on my feature branch?",
        "expected": {"contract_tests"},
    },
    {
        "agent": "ci",
        "query": "Will filling my dev environment with sample catalogue items destroy what's "
        "already stored?",
        "expected": {"make_seed"},
    },
    {
        "agent": "ci",
        "query": "Some specs pass or go red depending on when they execute. What are our rules for "
        "those?",
        "expected": {"flaky_coupon", "tz_assertions"},
    },
    # --- integrations ----------------------------------------------------------------------
    {
        "agent": "integrations",
        "query": "How do we stop the card processor from billing a customer two times when our "
        "call is repeated?",
        "expected": {"stripe_idempotency"},
    },
    {
        "agent": "integrations",
        "query": "Callbacks from the card processor can show up in an unexpected sequence; how "
        "should we cope?",
        "expected": {"stripe_webhook_order"},
    },
    {
        "agent": "integrations",
        "query": "Fetching the second batch of shipments from the carrier gives back "
        "identical results each time",
        "expected": {"shipfast_cursor"},
    },
    {
        "agent": "integrations",
        "query": "The carrier throttles us. How long should we wait before trying again?",
        "expected": {"shipfast_429"},
    },
    {
        "agent": "integrations",
        "query": "Moments in the accounting system's data dump lack a zone marker; how should we "
        "treat them?",
        "expected": {"odoo_local_time"},
    },
    {
        "agent": "integrations",
        "query": "Why do purchases shipped to Toronto show zero sales levy in the trial "
        "environment?",
        "expected": {"taxjar_canada"},
    },
    {
        "agent": "integrations",
        "query": "How many people can a single outgoing bulk mailing address at once?",
        "expected": {"postmark_batch"},
    },
    {
        "agent": "integrations",
        "query": "Texts to German phones vanish without any error. What is wrong?",
        "expected": {"twilio_sender_de"},
    },
    {
        "agent": "integrations",
        "query": "Our shopping-listing export to the search giant suddenly loses authorization "
        "after a long idle period",
        "expected": {"merchant_refresh_token"},
    },
    {
        "agent": "integrations",
        "query": "Can we just keep the address of the carrier's printable sticker and fetch it "
        "later?",
        "expected": {"shipfast_labels"},
    },
    {
        "agent": "integrations",
        "query": "The postcode verification vendor bills every query; how long may answers be "
        "reused?",
        "expected": {"loqate_cache"},
    },
    {
        "agent": "integrations",
        "query": "Prices in Japanese money come out a hundredfold too big",
        "expected": {"jpy_minor_unit"},
    },
    {
        "agent": "integrations",
        "query": "The back-office connection drops after a quarter hour of inactivity. How do "
        "we recover?",
        "expected": {"odoo_session"},
    },
    {
        "agent": "integrations",
        "query": "Building the parcel carrier integration: what throttling and listing quirks "
        "of their interface should I know about?",
        "expected": {"shipfast_429", "shipfast_cursor"},
    },
    {
        "agent": "integrations",
        "query": "What pitfalls await when importing catalogue items and their clock values "
        "from the accounting system?",
        "expected": {"odoo_sku_case", "odoo_local_time"},
    },
    # --- reviewer --------------------------------------------------------------------------
    {
        "agent": "reviewer",
        "query": "Who must vet structural changes to our largest sales records?",
        "expected": {"orders_dba"},
    },
    {
        "agent": "reviewer",
        "query": "What's the largest diff one colleague refuses to examine, and what does he "
        "want instead?",
        "expected": {"tom_pr_size"},
    },
    {
        "agent": "reviewer",
        "query": "Is it fine to manually tweak the TypeScript client bindings for the browser UI?",
        "expected": {"frontend_layout"},
    },
    {
        "agent": "reviewer",
        "query": "What sequence of words do we use for identifiers of domain operations?",
        "expected": {"service_naming"},
    },
    {
        "agent": "reviewer",
        "query": "Where are design choices written down, and do I amend a previous one when we "
        "alter course?",
        "expected": {"adr"},
    },
    {
        "agent": "reviewer",
        "query": "Where should a brand-new tunable go so that each deployment can adjust it?",
        "expected": {"settings_split"},
    },
    {
        "agent": "reviewer",
        "query": "What style of inline remarks irritates one of our senior colleagues?",
        "expected": {"tom_comments"},
    },
    {
        "agent": "reviewer",
        "query": "May I restructure the outdated business-customer purchase flow?",
        "expected": {"legacy_php"},
    },
    {
        "agent": "reviewer",
        "query": "How quickly should someone examine my submission, and what if no one responds?",
        "expected": {"review_sla"},
    },
    {
        "agent": "reviewer",
        "query": "By what time should I send things to our Brazilian colleague?",
        "expected": {"ana_hours"},
    },
    {
        "agent": "reviewer",
        "query": "What files does a fresh outgoing-message layout need?",
        "expected": {"email_templates"},
    },
    {
        "agent": "reviewer",
        "query": "How should history be collapsed when landing work on the invoicing codebase?",
        "expected": {"ana_squash"},
    },
    {
        "agent": "reviewer",
        "query": "What does it take to land a contribution in the money-handling module?",
        "expected": {"codeowners_payments", "maya_tests"},
    },
    {
        "agent": "reviewer",
        "query": "What should I know about collaborating with our colleague in Brazil on the "
        "invoicing code?",
        "expected": {"ana_hours", "ana_squash"},
    },
]

# Checked against every agent's facts: none may score at or above the threshold.
PARAPHRASE_UNRELATED = [
    "Book a meeting room for the planning session",
    "What's a good recipe for banana bread?",
    "Who won the football final?",
    "Plan the seating chart for the holiday party",
    "Recommend a novel for the team book club",
    "How tall is Mount Everest?",
    "Write a thank-you card for the retiring receptionist",
    "Compare health insurance options for employees",
    "Which plants survive in a dark office corner?",
    "Organise the team's trip to the mountains",
    "What is the best way to learn to play guitar?",
    "Prepare talking points for the annual shareholder meeting",
    "Find a caterer for the anniversary lunch",
    "How do I remove a red wine stain from a carpet?",
    "Translate the press statement into Spanish",
    "Set up the parking rota for the new office",
    "Summarise the plot of Hamlet",
    "What should we name the company's podcast?",
]

# Close to work: each names a person, a system or a place the agents' facts know, or a task an
# engineer on this team might be asked, without any fact answering it. Checked against every
# agent. Written before any scorer's figures on them were seen (2026-12-03), by reading the
# facts only; the labels are not changed afterwards. Unlike PARAPHRASE_UNRELATED, a "possibly
# related" pick is allowed here; a confident (tier-1) pick is a false accept.
PARAPHRASE_CLOSE_UNRELATED = [
    "Order a birthday cake for Ravi's team",
    "Book a meeting room for Maya's quarterly planning session",
    "Which restaurant should we take Tom to for his farewell dinner?",
    "Send Ana flowers to the São Paulo office for her promotion",
    "Negotiate a lower price with ShipFast's account manager for next year's contract",
    "Plan the agenda for the Odoo vendor's training day",
    "Write the welcome letter for Bruno's new intern",
    "How many vacation days does Maya have left this year?",
    "Choose a new logo for the storefront's Black Friday campaign",
    "Draft a press release announcing our launch in Canada",
    "Which laptop should we order for the new QA engineer?",
    "Collect the team's T-shirt sizes for the Grafana conference",
    "Summarise what customers say about our checkout on Trustpilot",
    "Reply to the Twilio sales rep who wants a call about their new pricing",
    "Write Ana's annual performance review",
    "What is the dress code for the team dinner in Lisbon?",
    "Lena asked for a parking space near the office; who handles that?",
    "Pick a venue for the payments team's summer party",
]
