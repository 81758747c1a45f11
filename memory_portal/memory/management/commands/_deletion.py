"""What the delete commands share: refusals as command errors, and the counts printed one per
line (`notes: 3`), the way the audit event records them."""

from __future__ import annotations

from django.core.management.base import CommandError

from memory_portal.memory.errors import MemoryPortalError


def refusal(err: MemoryPortalError) -> CommandError:
    return CommandError(f"{err.code}: {err.message} ({err.hint})")


def write_counts(stdout, heading: str, counts: dict) -> None:
    stdout.write(heading)
    for key, value in counts.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items())
        stdout.write(f"  {key}: {value}")
