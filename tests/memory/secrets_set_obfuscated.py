"""The third part of the secret-scanner corpus (docs/SECRETS.md): secrets hidden the ways an
outside attack hid them — invisible and look-alike characters, spaced out, split over lines,
encoded — plus three shapes that attack found missing, and look-alikes that must still pass
(accented and Cyrillic prose, fullwidth text, encoded ordinary data, escapes in code, soft
hyphens in long words, emoji sequences, placeholders). Written, and scored once against the
scanner as it stood, before the normalising pass was written; `rule` is None throughout (any
rule counts). Same shape as secrets_set.py. After that first score, two entries were added in the
shapes the attack reported and this file had not caught (a Django key holding parentheses, a
passphrase of plain words in quotes); none was changed.

Every value is fake: random characters in a documented shape; vendor prefixes are split so
scanners run on this repository do not take the file for a leak.
"""

import base64


def s(entry_id: str, text: str, secret: str) -> dict:
    return {"id": entry_id, "text": text, "rule": None, "secret": secret}


def h(entry_id: str, text: str) -> dict:
    return {"id": entry_id, "text": text}


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def spaced(text: str, gap: str = " ") -> str:
    return gap.join(text)


ZWSP, ZWJ, SHY, NBSP = "\u200b", "\u200d", "\u00ad", "\u00a0"
GH_BODY = "R8vK2mQ9xL4pT7wZ1nB6cF3dH5jS0aE8gY2u"
GH = "gh" + "p_" + GH_BODY
AWS_ID = "AK" + "IA" + "4QZ7XK2LM9PRT3VW"
AWS_SECRET = "q8Lm2Xv7Pk4Rt1Yw6Bn3Cd9Fh5Jz0Ga+Ue2Io/Sy"
AWS_PAIR = f"aws_access_key_id = {AWS_ID}\naws_secret_access_key = {AWS_SECRET}\n"
DJANGO_KEY = "django-" + "insecure-" + "8x#k2!v9q@l4m7p$r1t6w3y0b5c^d8f2g&h7j4k1"
TWILIO_SID = "AC" + "4f9c1a7e5b2d48c6a0e4f7b91d2c8a6e"
TWILIO_AUTH = "9b2d7e1c4f8a3b6d9e2c5f8a1b4d7e0c"
PASSPHRASE = "violet-anchor-73-quarry-lantern"
DJANGO_PARENS = "django-" + "insecure-" + "(3x!k8v(q2l-m7p)r1t=w6y+0b5c^d8f2g&h7j4k)"
WORDS_PASSPHRASE = "marble tundra copper violin"

SECRETS = [
    # --- A GitHub token hidden by characters a person does not see -----------------------------
    s("gh-zero-width-space", f"CI token: {GH[:6]}{ZWSP}{GH[6:20]}{ZWSP}{GH[20:]}", GH[20:]),
    s("gh-zero-width-joiner", f"token {GH[:3]}{ZWJ}{GH[3:]} for the release job", GH_BODY[10:]),
    s("gh-soft-hyphens", f"use {SHY.join([GH[:10], GH[10:22], GH[22:]])} to push tags",
      GH[22:]),
    s("gh-fullwidth", f"GitHub token {fullwidth(GH)} (bot account)", fullwidth(GH_BODY[10:])),
    s("gh-cyrillic-p", f"the deploy token is gh\u0440_{GH_BODY}", GH_BODY[10:]),
    s("gh-greek-and-cyrillic-letters",
      "token: " + GH.replace("K", "\u039a").replace("o", "\u03bf").replace("a", "\u0430"),
      GH_BODY[12:20]),
    s("gh-combining-accent", f"push with g\u0301hp_{GH_BODY}", GH_BODY[10:]),
    s("gh-combining-marks-inside", f"token {GH[:8]}\u0308{GH[8:16]}\u0327{GH[16:]}", GH_BODY[12:]),
    s("gh-spaced-out", f"the bot token is {spaced(GH)}", spaced(GH_BODY[10:20])),
    s("gh-nbsp-spaced", f"token: {spaced(GH, NBSP)}", spaced(GH_BODY[10:20], NBSP)),
    s("gh-split-over-two-lines", f"release token, in two parts:\n{GH[:18]}\n{GH[18:]}\n",
      GH[18:]),
    s("gh-json-escape", '{"env": {"GH_TOKEN": "gh\\u0070_' + GH_BODY + '"}}', GH_BODY[10:]),
    s("gh-html-entity", f"<code>gh&#112;_{GH_BODY}</code>", GH_BODY[10:]),
    s("gh-html-hex-entity", f"token gh&#x70;&#x5f;{GH_BODY} in the wiki page", GH_BODY[10:]),
    s("gh-base64", f"GH secret (base64): {b64(GH)}", b64(GH)[8:40]),
    s("gh-url-encoded", f"https://ci.acme.dev/hook?t=gh%70%5F{GH_BODY}", GH_BODY[10:]),
    # --- An AWS key pair hidden the same ways ---------------------------------------------------
    s("aws-pair-base64", f"~/.aws/credentials, base64 so it pastes cleanly: {b64(AWS_PAIR)}",
      b64(AWS_PAIR)[20:60]),
    s("aws-pair-hex", f"credentials as hex: {AWS_PAIR.encode().hex()}",
      AWS_PAIR.encode().hex()[40:100]),
    s("aws-id-zero-width", f"key id {AWS_ID[:4]}{ZWSP}{AWS_ID[4:]} with its secret in vault",
      AWS_ID[6:]),
    s("aws-id-fullwidth", f"ＡＷＳ key: {fullwidth(AWS_ID)}", fullwidth(AWS_ID[6:])),
    s("aws-secret-nbsp", f"aws_secret_access_key{NBSP}={NBSP}{AWS_SECRET}", AWS_SECRET[8:]),
    s("aws-secret-spaced", f"aws secret access key: {spaced(AWS_SECRET)}",
      spaced(AWS_SECRET[8:20])),
    s("aws-id-cyrillic", "access key \u0410KIA" + AWS_ID[4:], AWS_ID[6:]),
    # --- Shapes the outside corpus found missing ------------------------------------------------
    s("django-insecure-secret-key", f"SECRET_KEY={DJANGO_KEY}", DJANGO_KEY[16:]),
    s("django-secret-key-quoted", f"settings.py still has SECRET_KEY = '{DJANGO_KEY}'",
      DJANGO_KEY[16:]),
    s("twilio-sid-and-auth-token",
      f"Twilio account {TWILIO_SID} with auth token {TWILIO_AUTH} for SMS alerts",
      TWILIO_AUTH),
    s("twilio-sid-colon-token", f"twilio creds {TWILIO_SID}:{TWILIO_AUTH}", TWILIO_AUTH),
    s("passphrase-in-prose", f"The signing key's passphrase is {PASSPHRASE}, keep it offline.",
      PASSPHRASE),
    s("passphrase-for", f"passphrase for the backup GPG key: {PASSPHRASE}", PASSPHRASE),
    s("django-key-with-parentheses", f"SECRET_KEY = '{DJANGO_PARENS}'", DJANGO_PARENS[16:]),
    s("passphrase-of-words-quoted", f'The vault passphrase is "{WORDS_PASSPHRASE}".',
      WORDS_PASSPHRASE),
]  # fmt: skip

HARMLESS = [
    # --- Prose in other scripts and with accents: normalising must not invent a secret -------
    h("french-prose", "Le mot de passe du wiki est réinitialisé chaque trimestre par l'équipe."),
    h("german-soft-hyphens", "Die Donau\u00addampf\u00adschiff\u00adfahrts\u00adgesellschaft "
      "rotiert ihre Schlüssel monatlich."),
    h("russian-prose", "Токен доступа хранится в хранилище секретов, не в заметках."),
    h("greek-prose", "Ο κωδικός πρόσβασης αλλάζει κάθε μήνα."),
    h("japanese-fullwidth", "ＡＰＩキーはボールトにあります。ＣＩのジョブ番号は１２３４５です。"),
    h("emoji-zwj-sequence", "\U0001F469\u200d\U0001F4BB deploys on Fridays; \U0001F3F3\ufe0f\u200d\U0001F308 flag for the party"),
    h("combining-accents-prose", "Cafe\u0301 menus and nai\u0308ve caching both broke on deploy."),
    # --- Spaced and split text that is not a secret ---------------------------------------------
    h("spaced-heading", "S E C R E T S   O F   T H E   R E L E A S E   P R O C E S S"),
    h("spaced-grid", "The grid reads A B C D E F G H I J K L M N O P in row one."),
    h("lines-with-short-tokens", "Steps:\ngh\npr\ncreate --fill\nthen merge."),
    h("wrapped-paragraph", "The token is rotated by the release\nbot every ninety days and the"
      " old one\nis revoked at once."),
    # --- Encoded ordinary data ------------------------------------------------------------------
    h("base64-json-config", "config (base64): " + b64('{"region": "eu-west-1", "replicas": 3, '
      '"feature_flags": ["search", "recall"], "owner": "platform-team"}')),
    h("base64-prose", "payload: " + b64("The quarterly report is due on the first Monday of "
      "next month, after the board meeting.")),
    h("base64-png-header", "inline icon data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAABAAAAAQ"
      "CAYAAAAf8/9hAAAABHNCSVQICAgIfAhkiAAAAAlwSFlzAAAOxAAADsQBlSsOGwAAABl0RVh0U29mdHdhcmUA"),
    h("hex-sha256", "artifact sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"),
    h("hex-hello", "the probe sends 48656c6c6f2c20776f726c6421 and expects it echoed"),
    h("hex-uuid-list", "request ids 3f2504e0-4f89-11d3-9a0c-0305e82c3301 and "
      "6ba7b810-9dad-11d1-80b4-00c04fd430c8 both timed out"),
    h("commit-range", "regression between 1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b and "
      "0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e"),
    # --- Escapes in code and markup ---------------------------------------------------------
    h("json-unicode-escape", '{"name": "caf\\u00e9", "city": "M\\u00fcnchen"}'),
    h("html-entities", "Tom &amp; Jerry &#8212; the &lt;token&gt; placeholder stays literal."),
    h("url-encoded-query", "search?q=password%20reset%20link&lang=en"),
    # --- Placeholders and talk about keys ------------------------------------------------------
    h("openai-placeholder-dots", "Set OPENAI_API_KEY=sk-... in your shell before running it."),
    h("openai-placeholder-quoted", 'export OPENAI_API_KEY="sk-..." # your key here'),
    h("openai-placeholder-xs", "OPENAI_API_KEY=sk-xxxxxxxxxxxxxxxxxxxxxxxx"),
    h("django-secret-key-env", "SECRET_KEY is read from DJANGO_SECRET_KEY; never commit it."),
    h("django-insecure-prose", "Replace the django-insecure- default key before going live."),
    h("twilio-sid-alone", "Messages go out from Twilio account AC4f9c1a7e5b2d48c6a0e4f7b91d2c8a6e"
      " (the SID is public in our docs)."),
    h("passphrase-prose", "Every GPG key needs a passphrase; store it in the team vault."),
    h("aws-talk", "AKIA keys are long-term; prefer ASIA session credentials from SSO."),
]  # fmt: skip
