"""The development recall set: paraphrase questions about the facts of
tests/memory/recall_set.py, for tuning the hybrid score's calibration (its thresholds and
weights). The paraphrase set (tests/memory/recall_paraphrase_set.py) stays the blind test: tune
on this file, report on that one, and never tune on the paraphrase set.

Rules the labels follow (the same as the paraphrase set's):

- a question shares no term with any fact it expects: no word beyond stop-words, no stem and no
  synonym of the lexical scorer's map (tests/memory/test_recall_dev_set.py checks it with
  `recall.terms()`); it names what the fact is about in other words ("the card processor" for
  Stripe, "the rehearsal cluster" for staging);
- the questions are fresh, not rewordings of the paraphrase set's, and vary in style: questions,
  short task statements, complaints about a symptom, long and short;
- some questions need two facts; expected holds exactly the facts a careful engineer would want
  back for that question, no more;
- recall is per agent, as in the main set: expected keys name facts of the question's agent;
- DEV_UNRELATED questions have nothing to do with any agent's facts and are checked against
  every agent: none may recall anything. About half are "hard" (work-adjacent, or sharing a
  theme, a person or a place with some fact without being answered by it), the rest plainly
  off-topic.

The labels were written before any scorer's figures on this set were seen. Plain data: load it
with runpy.
"""

DEV_PARAPHRASES = [
    # --- release ---------------------------------------------------------------------------
    {
        "agent": "release",
        "query": "Our pre-live shipment job sits idle for ages and then aborts. I'm working "
        "from home today; could that matter?",
        "expected": {"staging_vpn"},
    },
    {
        "agent": "release",
        "query": "Setting up my laptop to ship to the rehearsal cluster: what network access "
        "do I require, and where are its passwords kept?",
        "expected": {"staging_vpn", "staging_secrets"},
    },
    {
        "agent": "release",
        "query": "An urgent hotfix has to reach shoppers on the eve of the weekend. Whose "
        "permission is required, and whom do we alert if it breaks?",
        "expected": {"prod_window", "oncall"},
    },
    {
        "agent": "release",
        "query": "Right after shipping a version with new model fields, the application "
        "containers restart over and over. Which order of steps prevents that?",
        "expected": {"migrations_first"},
    },
    {
        "agent": "release",
        "query": "What's our procedure for exposing a fresh build to a fraction of visitors, "
        "and if the numbers look bad, how do we go back to the last good version?",
        "expected": {"canary", "rollback"},
    },
    {
        "agent": "release",
        "query": "Shoppers see the site's previous look long after a UI ship",
        "expected": {"cdn_purge"},
    },
    {
        "agent": "release",
        "query": "Dark-launch the redesigned purchase step",
        "expected": {"feature_flags"},
    },
    {
        "agent": "release",
        "query": "Packaging the container sometimes drags on for a quarter hour instead of a "
        "couple; what triggers the slow path?",
        "expected": {"docker_cache"},
    },
    {
        "agent": "release",
        "query": "QA's sample purchases on the rehearsal shop vanished over Sunday night; who "
        "deleted them?",
        "expected": {"staging_reset"},
    },
    {
        "agent": "release",
        "query": "Uploading built containers from automation suddenly gets rejected as not "
        "permitted. What lapsed, and how often does that happen?",
        "expected": {"image_registry"},
    },
    {
        "agent": "release",
        "query": "Shipping the shop halts half-way with zero healthy replicas whenever the "
        "key-value store is offline",
        "expected": {"readiness_redis"},
    },
    {
        "agent": "release",
        "query": "Where do I jot down user-facing changes before we cut a tag?",
        "expected": {"changelog"},
    },
    {
        "agent": "release",
        "query": "Queue consumers are executing stale logic since I edited the async job module",
        "expected": {"celery_restart"},
    },
    {
        "agent": "release",
        "query": "How long do resolvers remember our domain's address, and what should we "
        "shorten ahead of a cutover?",
        "expected": {"dns_ttl"},
    },
    {
        "agent": "release",
        "query": "I need error output of the live service from three days back, but the "
        "container only shows a short tail",
        "expected": {"prod_logs"},
    },
    {
        "agent": "release",
        "query": "Why did last night's big schema job freeze at around two in the morning?",
        "expected": {"db_backup"},
    },
    # --- ci --------------------------------------------------------------------------------
    {
        "agent": "ci",
        "query": "The promo-code purchase spec goes red around the turn of the day; what do we "
        "do about it other than hitting retry?",
        "expected": {"flaky_coupon"},
    },
    {
        "agent": "ci",
        "query": "How many parallel browser drivers can the pipeline take before things start "
        "stalling?",
        "expected": {"playwright_workers"},
    },
    {
        "agent": "ci",
        "query": "Which relational engine release and trigram add-on must my machine have so "
        "that every spec really executes?",
        "expected": {"test_postgres"},
    },
    {
        "agent": "ci",
        "query": "Set up sample objects for the discount model's unit checks",
        "expected": {"factories"},
    },
    {
        "agent": "ci",
        "query": "After pinning a newer library, installs in the pipeline abort complaining "
        "the digest differs",
        "expected": {"pip_cache"},
    },
    {
        "agent": "ci",
        "query": "Which subset should I execute on my own machine to skip the lengthy browser "
        "and schema specs?",
        "expected": {"slow_marker"},
    },
    {
        "agent": "ci",
        "query": "May I patch the recorded expected output of our outgoing notifications manually?",
        "expected": {"email_snapshots"},
    },
    {
        "agent": "ci",
        "query": "Basket specs die with connection refused on the key-value store port",
        "expected": {"cart_redis"},
    },
    {
        "agent": "ci",
        "query": "Which servers must be up on my computer before all specs can pass?",
        "expected": {"test_postgres", "cart_redis"},
    },
    {
        "agent": "ci",
        "query": "The result-ordering spec for product lookup breaks every so often. May I put "
        "a short wait in it?",
        "expected": {"flaky_search"},
    },
    {
        "agent": "ci",
        "query": "My branch got rejected although the overall project percentage went up. "
        "What threshold applies?",
        "expected": {"diff_coverage"},
    },
    {
        "agent": "ci",
        "query": "The after-hours fault-injection analysis is broken; can I still land my branch?",
        "expected": {"mutmut_nightly"},
    },
    {
        "agent": "ci",
        "query": "Spec checks on calendar values pass on my Munich machine and break in the "
        "pipeline",
        "expected": {"tz_assertions"},
    },
    {
        "agent": "ci",
        "query": "Frontend bundling exits with code 137 on our in-house pipeline agents",
        "expected": {"runner_memory"},
    },
    {
        "agent": "ci",
        "query": "Our pipeline's browser automation stage and its asset bundling go on "
        "breaking under load. What resource limits have we learned about?",
        "expected": {"runner_memory", "playwright_workers"},
    },
    {
        "agent": "ci",
        "query": "Tag an unreliable spec so it stops holding everyone up until it's repaired",
        "expected": {"quarantine"},
    },
    {
        "agent": "ci",
        "query": "What decides which release of the code-style checker the pipeline executes?",
        "expected": {"ruff_pin"},
    },
    {
        "agent": "ci",
        "query": "Can every branch's pipeline call the card processor's trial environment? "
        "How many calls does it tolerate?",
        "expected": {"contract_tests"},
    },
    {
        "agent": "ci",
        "query": "Will the command that fills my development setup with sample merchandise "
        "keep my current records?",
        "expected": {"make_seed"},
    },
    # --- integrations ----------------------------------------------------------------------
    {
        "agent": "integrations",
        "query": "Moving the card processor's client to a newer interface revision: which "
        "date are we locked to, and what broke on the previous move?",
        "expected": {"stripe_api_version"},
    },
    {
        "agent": "integrations",
        "query": "Genuine callbacks from the parcel carrier are rejected by our authenticity "
        "validation. Why?",
        "expected": {"shipfast_signature"},
    },
    {
        "agent": "integrations",
        "query": "Right after pushing catalogue items to the hosted search engine, querying "
        "them returns stale results",
        "expected": {"algolia_eventual"},
    },
    {
        "agent": "integrations",
        "query": "Hardening our card-processor client: how do we stop double billing when a "
        "call is repeated, and cope with notifications landing in a jumbled sequence?",
        "expected": {"stripe_idempotency", "stripe_webhook_order"},
    },
    {
        "agent": "integrations",
        "query": "Set up card pricing for Tokyo shoppers; any money-formatting gotcha?",
        "expected": {"jpy_minor_unit"},
    },
    {
        "agent": "integrations",
        "query": "Set up storage of the printable parcel stickers the carrier produces",
        "expected": {"shipfast_labels"},
    },
    {
        "agent": "integrations",
        "query": "The carrier's shipment listing repeats the opening batch no matter which "
        "offset we ask for",
        "expected": {"shipfast_cursor"},
    },
    {
        "agent": "integrations",
        "query": "The carrier keeps throttling our sync. What unit is its back-off hint in?",
        "expected": {"shipfast_429"},
    },
    {
        "agent": "integrations",
        "query": "Processing the carrier's new-shipment callbacks: how do we authenticate "
        "them, and what do we do with the printable sticker they reference?",
        "expected": {"shipfast_signature", "shipfast_labels"},
    },
    {
        "agent": "integrations",
        "query": "Our back-office connector errors out mid-import after a long lull between "
        "calls; how should it recover?",
        "expected": {"odoo_session"},
    },
    {
        "agent": "integrations",
        "query": "Catalogue items won't pair up with their back-office counterparts because "
        "of capitalisation",
        "expected": {"odoo_sku_case"},
    },
    {
        "agent": "integrations",
        "query": "Sales levy for Montreal orders comes back as nothing in the trial environment",
        "expected": {"taxjar_canada"},
    },
    {
        "agent": "integrations",
        "query": "Our monthly bulletin to all subscribers bounces. Is there a cap on "
        "addressees per dispatch?",
        "expected": {"postmark_batch"},
    },
    {
        "agent": "integrations",
        "query": "Set up text alerts for shoppers in Munich",
        "expected": {"twilio_sender_de"},
    },
    {
        "agent": "integrations",
        "query": "The catalogue listing upload to the big search company stopped "
        "authenticating after a long dormant spell",
        "expected": {"merchant_refresh_token"},
    },
    {
        "agent": "integrations",
        "query": "Cut spending on the postcode-verification vendor",
        "expected": {"loqate_cache"},
    },
    {
        "agent": "integrations",
        "query": "Writing the accounting-system import: what about connection lulls, and "
        "which zone are its clock values in?",
        "expected": {"odoo_session", "odoo_local_time"},
    },
    # --- reviewer --------------------------------------------------------------------------
    {
        "agent": "reviewer",
        "query": "Where do I put a fresh component of the shop backend, and where do common "
        "routines belong?",
        "expected": {"apps_layout"},
    },
    {
        "agent": "reviewer",
        "query": "Which parts of the codebase get rigorous static typing?",
        "expected": {"mypy_strict"},
    },
    {
        "agent": "reviewer",
        "query": "The pre-integration gate refuses my push. What must each history entry "
        "begin with?",
        "expected": {"commit_ticket"},
    },
    {
        "agent": "reviewer",
        "query": "What does our pickiest senior colleague object to in submissions, both in "
        "size and in inline remarks?",
        "expected": {"tom_pr_size", "tom_comments"},
    },
    {
        "agent": "reviewer",
        "query": "My submission has sat untouched since I opened it; where should I nudge?",
        "expected": {"review_sla"},
    },
    {
        "agent": "reviewer",
        "query": "A vulnerability report came in for the dated wholesale purchase flow. May I "
        "tidy it up while I'm in there?",
        "expected": {"legacy_php"},
    },
    {
        "agent": "reviewer",
        "query": "We're swapping one message broker for another; where does the rationale get "
        "written down?",
        "expected": {"adr"},
    },
    {
        "agent": "reviewer",
        "query": "Which module holds the shared knobs and which the live-only ones, and where "
        "must a fresh knob go?",
        "expected": {"settings_split"},
    },
    {
        "agent": "reviewer",
        "query": "Create the layout for the order-shipped notification; which formats does "
        "it require?",
        "expected": {"email_templates"},
    },
    {
        "agent": "reviewer",
        "query": "Schema work introducing a field on our biggest sales-records relation: who "
        "else must look at it?",
        "expected": {"orders_dba"},
    },
    {
        "agent": "reviewer",
        "query": "What identifier should a domain operation that voids a subscription get?",
        "expected": {"service_naming"},
    },
    {
        "agent": "reviewer",
        "query": "Where does the browser UI code live, and which of its files are "
        "machine-produced?",
        "expected": {"frontend_layout"},
    },
    {
        "agent": "reviewer",
        "query": "Can I ship a money-handling change now and write its specs later?",
        "expected": {"maya_tests"},
    },
    {
        "agent": "reviewer",
        "query": "Who must OK a change to the money-handling module, and how many OKs does it "
        "take?",
        "expected": {"codeowners_payments"},
    },
    {
        "agent": "reviewer",
        "query": "How should I shape my branch's history before it lands in the invoicing "
        "codebase?",
        "expected": {"ana_squash", "commit_ticket"},
    },
    {
        "agent": "reviewer",
        "query": "How fast can I expect feedback on my submission, and by what hour should I "
        "seek it from our colleague in Brazil?",
        "expected": {"review_sla", "ana_hours"},
    },
]

# Checked against every agent's facts: none may recall anything. The first half are "hard"
# (work-adjacent or sharing a theme with some fact), the second half plainly off-topic.
DEV_UNRELATED = [
    # hard
    "Book train tickets to Berlin for the team offsite",
    "When is Ana's birthday, and what present should we get her?",
    "Submit my expense claim for the conference hotel",
    "How many days of annual leave do I have left?",
    "What's the visa process for a colleague relocating from Brazil to Canada?",
    "Set up a Rust workspace with cargo for the command-line tool",
    "Plan the social media posts for the Black Friday campaign",
    "Renew the office lease and negotiate the rent",
    "How do I centre a div vertically in CSS?",
    "Which monitors and docking stations should we buy for the new hires?",
    "Write the job ad for a senior Android developer",
    "Prepare the tax return for the company's Japanese subsidiary",
    # plainly off-topic
    "What's the best way to cook a mushroom risotto?",
    "Who holds the world record for the marathon?",
    "How do I teach my dog to sit?",
    "Suggest a board game for a rainy weekend",
    "How many moons does Jupiter have?",
    "Which wine goes with grilled salmon?",
    "Tips for growing tomatoes on a balcony",
    "Who painted the ceiling of the Sistine Chapel?",
    "How long should I boil an egg for a soft yolk?",
    "Explain the offside rule in ice hockey",
]
DEV_UNRELATED_OFF_TOPIC = DEV_UNRELATED[12:]  # the plainly off-topic half
