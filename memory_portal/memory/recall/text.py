"""Recall's text analysis (docs/RECALL.md, "Text to terms"): `terms()` turns a text into its
stemmed, canonical content words. Lower-case; a few multi-word engineering phrases become one
word (PHRASES); tokens are ticket keys (pin-812), dotted numbers (2.14) or runs of letters and
digits; English function words (STOPWORDS) go; each word is stemmed (Porter); a small map joins
engineering synonyms (SYNONYMS); generic task words (TASK_WORDS: fix, add, change, today...) go.
No database and no model."""

from __future__ import annotations

import re
from functools import lru_cache


def _words(text: str) -> list[str]:
    return text.split()


STOPWORDS = frozenset(
    _words(
        """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers him his how i if in into is it its itself
    just me more most my no nor not now of off on once only or other our ours out over own
    same she should so some such than that the their theirs them then there these they this
    those through to too under until up very was we were what when where which while who whom
    why will with would you your yours also get gets got use uses used using need needs needed
    make makes via per s t d ll re ve m don doesn didn isn aren wasn weren won wouldn shouldn
    couldn cannot let lets us
    """
    )
)

# Words that say what to do or when, not what about: dropped (with their inflections) so a
# task's wording does not dilute its subject. General English and task verbs only.
TASK_WORDS = _words(
    """
    fix add change update investigate look check help want try still thing something anything
    way know see sure going maybe like currently actually really ensure please issue problem
    new today yesterday tomorrow morning afternoon evening week ago sometimes always never
    often usually ever every even already instead rather right away one
    """
)

# Multi-word forms of one engineering term, rewritten before tokenising.
PHRASES = (
    (re.compile(r"\b(?:pull|merge)[- ]requests?\b"), " pr "),
    (re.compile(r"\broll(?:s|ed|ing)?[- ]?backs?\b"), " rollback "),
    (re.compile(r"\broll(?:s|ed|ing)?[- ]?outs?\b"), " rollout "),
    (re.compile(r"\bend[- ]to[- ]end\b"), " e2e "),
    (re.compile(r"\bon[- ]call\b"), " oncall "),
    (re.compile(r"\bout[- ]of[- ]memory\b"), " oom "),
    (re.compile(r"\b(?:time[sd]?|timing)[- ]?outs?\b"), " timeout "),
    (re.compile(r"\bsign(?:s|ed|ing)?[- ]off\b"), " approve "),
    (re.compile(r"\btime[- ]zones?\b"), " timezone "),
    (re.compile(r"\be-mail"), "email"),
    (re.compile(r"\bre-(?=[a-z])"), "re"),  # re-run, re-running -> rerun
)

# Engineering synonyms and abbreviations: every word of a group counts as its first word.
SYNONYMS = tuple(
    tuple(_words(group))
    for group in (
        # environments and shipping
        "prod production productions",
        "staging preprod",
        "deploy release rollout",
        "kubernetes k8s kube",
        "environment env envs",
        "configuration config configs configure setting settings",
        # failures
        "flaky flake flakiness intermittent intermittently sporadic sporadically randomly"
        " nondeterministic",
        "fail failure",
        "hang hung stall stuck",
        "duplicate duplicated dupe twice",
        # storage and code
        "database db datastore",
        "postgres postgresql psql pg",
        "repository repo",
        "pr prs mr",
        "dependency deps dep",
        "upgrade bump",
        "application app apps",
        "documentation doc docs",
        "directory dir folder",
        "javascript js",
        "typescript ts",
        "delete remove wipe erase",
        # people and messages
        "approve approval approver",
        "email mail",
        "secret credential credentials",
        "message msg",
        # time
        "timezone tz",
        "date datetime timestamp",
        "url link uri",
    )
)

TOKEN_RE = re.compile(r"[a-z][a-z0-9]*-\d+|\d+(?:\.\d+)+|[a-z0-9]+")

_VOWELS = frozenset("aeiou")


def _consonant(w: str, i: int) -> bool:
    ch = w[i]
    if ch in _VOWELS:
        return False
    if ch == "y":
        return i == 0 or not _consonant(w, i - 1)
    return True


def _measure(w: str) -> int:
    """Porter's m: the number of vowel-consonant sequences in w."""
    m, seen_vowel = 0, False
    for i in range(len(w)):
        if not _consonant(w, i):
            seen_vowel = True
        elif seen_vowel:
            m += 1
            seen_vowel = False
    return m


def _has_vowel(w: str) -> bool:
    return any(not _consonant(w, i) for i in range(len(w)))


def _double_consonant(w: str) -> bool:
    return len(w) >= 2 and w[-1] == w[-2] and _consonant(w, len(w) - 1)


def _cvc(w: str) -> bool:
    return (
        len(w) >= 3
        and _consonant(w, len(w) - 3)
        and not _consonant(w, len(w) - 2)
        and _consonant(w, len(w) - 1)
        and w[-1] not in "wxy"
    )


_STEP2 = (
    ("ational", "ate"),
    ("tional", "tion"),
    ("enci", "ence"),
    ("anci", "ance"),
    ("izer", "ize"),
    ("bli", "ble"),
    ("alli", "al"),
    ("entli", "ent"),
    ("eli", "e"),
    ("ousli", "ous"),
    ("ization", "ize"),
    ("ation", "ate"),
    ("ator", "ate"),
    ("alism", "al"),
    ("iveness", "ive"),
    ("fulness", "ful"),
    ("ousness", "ous"),
    ("aliti", "al"),
    ("iviti", "ive"),
    ("biliti", "ble"),
    ("logi", "log"),
)
_STEP3 = (
    ("icate", "ic"),
    ("ative", ""),
    ("alize", "al"),
    ("iciti", "ic"),
    ("ical", "ic"),
    ("ful", ""),
    ("ness", ""),
)
_STEP4 = (
    "al",
    "ance",
    "ence",
    "er",
    "ic",
    "able",
    "ible",
    "ant",
    "ement",
    "ment",
    "ent",
    "ion",
    "ou",
    "ism",
    "ate",
    "iti",
    "ous",
    "ive",
    "ize",
)


def _longest(w: str, suffixes):
    best = None
    for item in suffixes:
        suffix = item[0] if isinstance(item, tuple) else item
        if w.endswith(suffix) and (best is None or len(suffix) > len(best[0])):
            best = (suffix, item[1] if isinstance(item, tuple) else "")
    return best


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """The Porter stemmer (1980), with Porter2's rule for a final y (deploy stays deploy, retry
    becomes retri like retries). Deterministic and data-free: deploys / deployed / deploying /
    deployment all give deploy."""
    w = word
    if len(w) <= 2 or not w.isalpha():
        return w
    # Step 1a: plurals.
    if w.endswith("sses") or w.endswith("ies"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    # Step 1b: -ed, -ing.
    if w.endswith("eed"):
        if _measure(w[:-3]) > 0:
            w = w[:-1]
    else:
        for suffix in ("ed", "ing"):
            if w.endswith(suffix) and _has_vowel(w[: -len(suffix)]):
                w = w[: -len(suffix)]
                if w.endswith(("at", "bl", "iz")):
                    w += "e"
                elif _double_consonant(w) and w[-1] not in "lsz":
                    w = w[:-1]
                elif _measure(w) == 1 and _cvc(w):
                    w += "e"
                break
    # Step 1c (Porter2): y -> i after a consonant that is not the first letter.
    if len(w) > 2 and w[-1] == "y" and _consonant(w, len(w) - 2):
        w = w[:-1] + "i"
    # Steps 2 and 3: derivational suffixes, when the rest has m > 0.
    for table in (_STEP2, _STEP3):
        hit = _longest(w, table)
        if hit and _measure(w[: -len(hit[0])]) > 0:
            w = w[: -len(hit[0])] + hit[1]
    # Step 4: drop a suffix when the rest has m > 1.
    hit = _longest(w, _STEP4)
    if hit:
        rest = w[: -len(hit[0])]
        if _measure(rest) > 1 and (hit[0] != "ion" or rest.endswith(("s", "t"))):
            w = rest
    # Step 5: a final e, and -ll.
    if w.endswith("e"):
        m = _measure(w[:-1])
        if m > 1 or (m == 1 and not _cvc(w[:-1])):
            w = w[:-1]
    if w.endswith("ll") and _measure(w) > 1:
        w = w[:-1]
    return w


# A synonym is looked up as the exact word, then by its stem, except where the stem is also
# another word's: production's stem is product's and setting's is set's, so only the words
# "production" and "setting" are mapped.
_SHARED_STEMS = frozenset({"product", "set"})
_CANONICAL_WORDS = {word: stem(group[0]) for group in SYNONYMS for word in group}
_CANONICAL_STEMS = {
    stem(word): stem(group[0])
    for group in SYNONYMS
    for word in group
    if stem(word) not in _SHARED_STEMS
}
_DROP = frozenset(stem(word) for word in TASK_WORDS)


def terms(text: str) -> list[str]:
    """The text's stemmed, canonical content words, in order (docs/RECALL.md)."""
    text = text.lower()
    for pattern, replacement in PHRASES:
        text = pattern.sub(replacement, text)
    out = []
    for word in TOKEN_RE.findall(text):
        if word in STOPWORDS:
            continue
        t = _CANONICAL_WORDS.get(word)
        if t is None:
            t = stem(word)
            t = _CANONICAL_STEMS.get(t, t)
        if t not in _DROP:
            out.append(t)
    return out


# A word as written, with an optional possessive ("Maya's"): what names are looked for in.
_WRITTEN_WORD = re.compile(r"([^\W\d_][\w-]*)(?:['’]s\b)?")
# What ends a sentence or a title: the word after it is capitalised for that reason alone.
_SENTENCE_END = re.compile(r"[.!?:;\n]")


# Capitalised by convention, but times, not who or what: "deploy on Friday" is about Friday.
_CALENDAR = frozenset(
    _words(
        """
    monday tuesday wednesday thursday friday saturday sunday january february march april may
    june july august september october november december
    """
    )
)


def names(text: str) -> frozenset[str]:
    """The names a text uses, lower-cased: words capitalised in the middle of a sentence
    (`Maya`, `ShipFast`, `São`), not acronyms (`CI`, `SKU`: all capitals; `PRs`), not days and
    months and not a sentence's first word."""
    found = set()
    for sentence in _SENTENCE_END.split(text):
        for word in _WRITTEN_WORD.findall(sentence)[1:]:
            if _capitalised(word):
                found.add(word.lower())
    return frozenset(found - _CALENDAR)


def capitalised(text: str) -> frozenset[str]:
    """Every word a text writes capitalised, a sentence's first word too (not acronyms, days,
    months, function words or the synonym map's engineering words), lower-cased: the names it
    may use, for a question whose own case tells none (no `names`)."""
    found = {word.lower() for word in _WRITTEN_WORD.findall(text) if _capitalised(word)}
    return frozenset(found - _CALENDAR - STOPWORDS - _VOCABULARY)


# The engineering words the synonym map knows: subjects, never names ("Production releases…").
_VOCABULARY = frozenset(word for group in SYNONYMS for word in group)


def _capitalised(word: str) -> bool:
    """A capital first, not an acronym (`CI`) or its plural (`PRs`), not a code name."""
    acronym = word.isupper() or (word[-1] == "s" and len(word) > 2 and word[:-1].isupper())
    return word[0].isupper() and not acronym and "_" not in word


def writes_lower(text: str, word: str) -> bool:
    """Whether `text` writes `word` (lower-case) in lower case, as a word of its own: searched,
    not split into words, for a memory's texts joined (`lower_words` of each would cost ~10 ms
    per 1,000 facts)."""
    return word in text and re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None


def written_words(text: str) -> frozenset[str]:
    return frozenset(word.lower() for word in _WRITTEN_WORD.findall(text))


def lower_words(text: str) -> frozenset[str]:
    """The words written in lower case: used as common nouns, whatever else is capitalised."""
    return frozenset(word for word in _WRITTEN_WORD.findall(text) if word.islower())


def without_words(text: str, words: frozenset[str]) -> str:
    """The text without these (lower-cased) words and their possessives."""
    kept = _WRITTEN_WORD.sub(lambda m: "" if m.group(1).lower() in words else m.group(), text)
    return " ".join(kept.split())
