"""Rows rendered as dicts through their output shapes (`schemas.outputs`), and the tools'
pages bounded at 12,000 bytes of JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from .schemas.outputs import EntryOut, MemoryOut, RecoveryOut, ScratchpadItemOut, Shape

PAGE_BYTES = 12_000


def _render(shape: type[Shape]) -> Callable[[Any], dict[str, Any]]:
    """A row as a dict, through its one output shape (for the tools' byte-bounded pages)."""

    def render(row: Any) -> dict[str, Any]:
        return shape.from_orm(row).model_dump()

    return render


entry = _render(EntryOut)  # a note as the agent tools return it
recovery_entry = _render(RecoveryOut)
memory = _render(MemoryOut)  # the v1 memory object
scratchpad_item = _render(ScratchpadItemOut)


def size_of(value: Any) -> int:
    return len(json.dumps(value, cls=DjangoJSONEncoder, ensure_ascii=False).encode())


def page(rows: list, *, offset: int, limit: int, more: bool, render, key: str = "entries") -> dict:
    """A page of at most `limit` rendered rows that fits in 12,000 bytes of JSON. `rows` holds
    up to limit + 1 items from `offset`; `more` says whether anything follows them. When even
    one entry is too big, its content is cut to fit and marked `contentTruncated`."""
    body: dict[str, Any] = {key: [], "nextOffset": None}
    for row in rows[:limit]:
        item = render(row)
        body[key].append(item)
        if size_of(body) > PAGE_BYTES:
            body[key].pop()
            if not body[key] and "content" in item:
                over = size_of({key: [item], "nextOffset": offset + 1}) - PAGE_BYTES
                text = item["content"].encode()[: max(0, len(item["content"].encode()) - over - 64)]
                item["content"] = text.decode(errors="ignore")
                item["contentTruncated"] = True
                body[key].append(item)
            break
    shown = len(body[key])
    if shown < len(rows) or more:
        body["nextOffset"] = offset + shown
    return body
