"""Progress of a long command (the demo load, an export, an import, the embeddings): a tqdm
bar when the stream is a terminal, otherwise a plain line every few seconds and one at the
end — so a log shows the command is alive without a wall of carriage returns. Written to
stderr by the commands: stdout stays the command's output (an export's NDJSON)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from tqdm import tqdm

LINE_EVERY_SECONDS = 5.0


class Progress:
    def __init__(
        self,
        label: str,
        *,
        total: int | None = None,
        unit: str = "item",
        stream: TextIO | None = None,
        every: float = LINE_EVERY_SECONDS,
    ):
        self.label, self.total, self.unit = label, total, unit
        self.stream = stream if stream is not None else sys.stderr
        self.every = every
        self.done = 0
        self.started = self.last = time.monotonic()
        self.bar = None
        if hasattr(self.stream, "isatty") and self.stream.isatty():
            # A terminal is the process's own stderr (a command's OutputWrapper would end each
            # of the bar's redraws with a newline).
            self.bar = tqdm(total=total, desc=label, unit=unit, file=sys.stderr, leave=True)

    def _line(self, final: bool = False) -> str:
        of = f" of {self.total:,}" if self.total else ""
        share = f" ({100 * self.done // self.total}%)" if self.total and not final else ""
        took = f" in {time.monotonic() - self.started:.1f} s" if final else ""
        return f"{self.label}: {self.done:,}{of} {self.unit}s{share}{took}"

    def update(self, n: int = 1) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
            return
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            self.stream.write(self._line() + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        else:
            self.stream.write(self._line(final=True) + "\n")
            self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
