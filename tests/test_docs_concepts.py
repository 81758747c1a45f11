"""docs/CONCEPTS.md stays true to the code: every error code, with its status, is listed."""

from __future__ import annotations

import re
from pathlib import Path

from memory_portal.memory.errors import CODES

CONCEPTS = Path(__file__).resolve().parent.parent / "docs" / "CONCEPTS.md"


def test_every_error_code_is_in_the_concepts_table_under_its_status():
    rows = {}
    for line in CONCEPTS.read_text().splitlines():
        match = re.match(r"\| (\d{3}) \| (.+) \|$", line)
        if match:
            rows[int(match.group(1))] = set(re.findall(r"`([a-z_]+)`", match.group(2)))
    listed = {code: status for status, codes in rows.items() for code in codes}
    assert listed == {code: spec.status for code, spec in CODES.items()}
