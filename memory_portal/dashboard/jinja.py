"""The Jinja2 environment of the dashboard's hot partials (`templates/jinja2/`): the notes
table's row, drawn 50 to 100 times a page, where Django's template engine spent most of the
page's time. It offers the Django filters the row uses, with Django's output: `date`,
`truncatechars` and `linebreaksbr`. Its `url()` is given with each row
(templatetags/note_rows.py)."""

from __future__ import annotations

import re
from datetime import date, datetime
from functools import lru_cache

from django.template import defaultfilters
from django.utils.html import escape
from django.utils.timezone import template_localtime
from jinja2 import Environment, StrictUndefined
from markupsafe import Markup

from memory_portal.memory.recall.text import terms

# Django's date formats the row uses, written out: `dateformat` builds a formatter object a
# call, several times a row. Any other format goes to Django's own filter.
_FORMATS = {
    "Y-m-d": lambda v: f"{v.year:04d}-{v.month:02d}-{v.day:02d}",
    "Y-m-d H:i": lambda v: f"{v.year:04d}-{v.month:02d}-{v.day:02d} {v.hour:02d}:{v.minute:02d}",
    "c": lambda v: v.isoformat(),
}


def date_filter(value, fmt: str) -> str:
    """Django's `date` filter: the value in the current time zone (as Django's templates give
    it), "" for anything that is not a date."""
    if not isinstance(value, date):
        return defaultfilters.date(value, fmt)
    value = template_localtime(value)
    fast = _FORMATS.get(fmt)
    if fast is None or (fmt != "Y-m-d" and not isinstance(value, datetime)):
        return defaultfilters.date(value, fmt)
    return fast(value)


def _linebreaksbr(value) -> str:
    return defaultfilters.linebreaksbr(value, autoescape=True)


_WORD = re.compile(r"[^\W_]+")


@lru_cache(maxsize=8192)
def _word_terms(word: str) -> frozenset[str]:
    return frozenset(terms(word))


def searched_terms(query: str) -> frozenset[str]:
    """What a text search matches words on: the query's terms as the ranker reads them
    (recall's `terms`: stemmed, synonyms folded, stop words left out)."""
    return frozenset(terms(query))


def marked(value, searched: frozenset[str]) -> Markup:
    """The text escaped, each of its words the search matched (`searched_terms`: "previews"
    for "preview", never "do" inside "docs") wrapped in <mark>, line breaks as <br>: the
    notes table's rows after a text search. Matched on the text itself, then each piece
    escaped, so a word never matches inside an escaped character."""
    text = str(value).replace("\r\n", "\n")
    if searched:
        pieces, last = [], 0
        for word in _WORD.finditer(text):
            if _word_terms(word.group()) & searched:
                pieces.append(escape(text[last : word.start()]))
                pieces.append(f"<mark>{escape(word.group())}</mark>")
                last = word.end()
        pieces.append(escape(text[last:]))
        html = "".join(str(piece) for piece in pieces)
    else:
        html = str(escape(text))
    return Markup(html.replace("\n", "<br>"))


def environment(**options) -> Environment:
    # A name the row is not given is a bug in the caller, not an empty string: fail loudly.
    options["undefined"] = StrictUndefined
    options["keep_trailing_newline"] = True
    # A block tag's own line leaves nothing behind: a page draws a row 50 to 100 times.
    options["trim_blocks"] = True
    options["lstrip_blocks"] = True
    env = Environment(**options)
    env.filters.update(
        date=date_filter,
        truncatechars=defaultfilters.truncatechars,
        linebreaksbr=_linebreaksbr,
        marked=marked,
    )
    return env
