"""Public ids: a type prefix and a lowercase ULID (`mem_01j…`), sortable by creation time."""

from ulid import ULID


def make_id(prefix: str) -> str:
    return f"{prefix}_{str(ULID()).lower()}"


def new_agent_id() -> str:
    return make_id("agt")


def new_run_id() -> str:
    return make_id("run")


def new_note_id() -> str:
    return make_id("mem")


def new_recovery_id() -> str:
    return make_id("rec")


def new_item_id() -> str:
    return make_id("itm")
