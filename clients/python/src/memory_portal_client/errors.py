"""One exception for every refusal: the server's error envelope, field by field."""

from __future__ import annotations

from typing import Any


class MemoryPortalError(Exception):
    """The server refused a call (`status` is its HTTP status), or could not be reached
    (`code` "connection_failed", `status` None).

    `code`, `message` and `hint` are the envelope's; `field` names the offending input
    (`memory_invalid`), `reason` the rule a refused text broke (never the text);
    `retry_after` is the seconds the server asked to wait (503 and 429), after the client's own
    retries ran out; `lines` lists an import's bad lines."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        hint: str = "",
        status: int | None = None,
        field: str | None = None,
        reason: str | None = None,
        retry_after: float | None = None,
        lines: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint
        self.status = status
        self.field = field
        self.reason = reason
        self.retry_after = retry_after
        self.lines = lines or []

    @property
    def retryable(self) -> bool:
        """The same call may succeed later: nothing was written."""
        return self.retry_after is not None or self.code == "connection_failed"

    def __str__(self) -> str:
        text = f"{self.code}: {self.message}"
        if self.field:
            text += f" (field {self.field})"
        return text + (f" — {self.hint}" if self.hint else "")

    def __repr__(self) -> str:
        return f"MemoryPortalError(code={self.code!r}, status={self.status!r})"

    @classmethod
    def from_response(cls, status: int, body: Any, retry_after: float | None) -> MemoryPortalError:
        error = body.get("error") if isinstance(body, dict) else None
        if not isinstance(error, dict) or "code" not in error:
            return cls(
                f"http_{status}",
                f"The server answered {status} without an error body.",
                status=status,
                retry_after=retry_after,
            )
        return cls(
            error["code"],
            error.get("message", ""),
            hint=error.get("hint", ""),
            status=status,
            field=error.get("field"),
            reason=error.get("reason"),
            retry_after=retry_after,
            lines=error.get("lines"),
        )
