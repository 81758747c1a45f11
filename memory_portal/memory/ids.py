"""Public ids: a type prefix and a lowercase ULID (`mem_01j…`), sortable by creation time."""

import re
import secrets

from ulid import ULID

# What a public id can look like: its prefix, then letters and digits (a ULID is 26), within
# the 40-character column. Anything else — NUL, quotes, non-ASCII, a page of text — is no id.
_PUBLIC_ID = re.compile(r"[0-9a-z]{1,36}", re.ASCII)


def make_id(prefix: str) -> str:
    return f"{prefix}_{str(ULID()).lower()}"


def id_floor(prefix: str, when: float) -> str:
    """The smallest id with `prefix` made at `when` (a Unix time) or later: ids compare in the
    order they were made, so `pk >= id_floor(…)` selects by creation time on the primary key."""
    return f"{prefix}_{str(ULID.from_timestamp(when))[:10].lower()}{'0' * 16}"


def new_agent_id() -> str:
    return make_id("agt")


def new_key_id() -> str:
    return make_id("key")


def new_run_id() -> str:
    return make_id("run")


def new_note_id() -> str:
    return make_id("mem")


def new_recovery_id() -> str:
    return make_id("rec")


def new_item_id() -> str:
    return make_id("itm")


def is_public_id(value: str, prefix: str) -> bool:
    """Whether `value` has the shape of a public id with `prefix` (it may still not exist)."""
    head, sep, tail = value.partition("_")
    return head == prefix and bool(sep) and _PUBLIC_ID.fullmatch(tail) is not None


def new_revert_id() -> str:
    return make_id("rvt")


def new_webhook_id() -> str:
    return make_id("whk")


def new_read_key() -> int:
    """A note's or a run's compact key in the read records (`read_key`): a random positive
    63-bit number. Eight bytes where the public id takes 31, in a table that grows by one row
    per note served; random rather than a sequence so that it is made the same way on every
    database. Two rows share one with odds of about n² / 2⁶⁴ (3 in 100 million at a million
    notes); the column's unique constraint refuses the second."""
    return secrets.randbits(63)
