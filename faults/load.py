"""The writers of the fault suite: threads that write distinct notes through `POST
/api/tools/memory_write` at a steady pace and record every request — content, answer, timing —
without ever retrying, so what the server answered is exactly what gets checked."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.client import HTTPException
from typing import Any

from .infra import call

# A run may make 512 calls and write 128 new notes; a writer moves to its next run well before.
CALLS_PER_RUN = 100


@dataclass
class Record:
    writer: int
    project: str
    content: str
    started: float
    ended: float = 0.0
    status: int | None = None  # None: no answer (the connection failed or timed out)
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    failure: str | None = None  # the client-side failure, when there was no answer

    @property
    def latency(self) -> float:
        return self.ended - self.started

    @property
    def acknowledged(self) -> bool:
        return self.status == 200 and isinstance(self.body, dict) and bool(self.body.get("id"))


@dataclass
class Writer:
    index: int
    project: str
    tokens: list[str]  # one per run, used in turn
    port: int
    nonce: str
    interval: float
    timeout: float
    offset: float = 0.0  # writers start staggered, so requests arrive evenly, not in bursts
    records: list[Record] = field(default_factory=list)
    ran_out_of_runs: bool = False

    def content(self, seq: int) -> str:
        return (
            f"Fault suite {self.nonce}: writer {self.index} note {seq} for {self.project}. "
            "The nightly export retried after the database went away; compare row counts."
        )

    def run(self, stop: threading.Event) -> None:
        seq = 0
        next_start = time.monotonic() + self.offset
        if stop.wait(self.offset):
            return
        while not stop.is_set():
            run_index, calls = divmod(seq, CALLS_PER_RUN)
            if run_index >= len(self.tokens):
                self.ran_out_of_runs = True
                return
            record = Record(self.index, self.project, self.content(seq), time.monotonic())
            try:
                answer = call(
                    self.port,
                    "POST",
                    "/api/tools/memory_write",
                    token=self.tokens[run_index],
                    body={"kind": "lesson", "target": "long_term", "content": record.content},
                    timeout=self.timeout,
                )
            except (OSError, HTTPException) as exc:
                record.failure = type(exc).__name__
            else:
                record.status = answer.status
                record.headers = answer.headers
                record.body = answer.json()
                if record.body is None:
                    record.body = answer.body[:200].decode(errors="replace")
            record.ended = time.monotonic()
            self.records.append(record)
            seq += 1
            next_start += self.interval
            pause = next_start - time.monotonic()
            if pause > 0:
                stop.wait(pause)
            else:
                next_start = time.monotonic()  # behind: do not burst to catch up


def start_writers(writers: list[Writer], stop: threading.Event) -> list[threading.Thread]:
    threads = [
        threading.Thread(target=w.run, args=(stop,), name=f"writer-{w.index}", daemon=True)
        for w in writers
    ]
    for thread in threads:
        thread.start()
    return threads
