"""`MemoryPortalStore`: a LangGraph `BaseStore` whose items are Memory Portal notes, so a
LangGraph agent's long-term memory is written, reviewed, vetoed and restored like any agent's.

    store = MemoryPortalStore("http://127.0.0.1:8000", "mpk_…")  # an agent key, or a run token
    graph = builder.compile(store=store)

An item is one `fact` note of the agent's project: its content is the JSON object
`{"namespace": [...], "key": ..., "value": {...}}` (what a reviewer reads in the dashboard), its
summary `LangGraph · users/u1 · prefs`, its tags `langgraph`, one for the key and one for each
of the first six levels of the namespace (so `get` and `search` ask the server for exactly
those notes). The product's rules hold for the store:

- `put` writes a new note and forgets the item's previous one (a recovery record a manager can
  restore); putting back a value the agent had forgotten restores that note. A value a person
  vetoed or rejected is refused (`MemoryPortalError` `memory_vetoed` / `memory_rejected`), and
  so is one holding a secret. A version a manager reviewed cannot be forgotten by an agent: it
  stays beside the new one, and `get` answers the newest.
- `delete` forgets the item (`memory_trust_locked` when a person reviewed it).
- `search` with a `query` is the server's search (full text, and meaning when embeddings are
  on), best first, without a score; `filter` is applied here, with LangGraph's own matching.
- Reads serve only what the agent may see: never a vetoed, rejected, forgotten or expired
  note; a reviewer agent sees reviewed ones only.
- `index` and `ttl` are not taken: the server indexes every note itself.

Every call counts against the run's 512 tool calls. Given an agent key (`mpk_…`), the store
starts a run when it needs one (task "LangGraph store") and a new one when the run's budget is
spent or the run was finished, and finishes the runs it started (succeeded) when their budget
is spent and when it is closed; given a run token it uses that run until it ends.
`search` and `list_namespaces` read pages of five notes, one call each."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Generator, Iterable
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)

# LangGraph's own matching of a search filter and of a namespace condition, so this store
# answers as its in-memory store does.
from langgraph.store.memory import _compare_values, _does_match

from .client import AsyncClient, Client
from .errors import MemoryPortalError
from .models import Entry, Page

MARKER_TAG = "langgraph"
PREFIX_LEVELS = 6  # tags: the marker, the key, and one per namespace level up to this depth
SUMMARY_MAX = 240
KEY_PREFIX = "mpk_"
RENEW_CODES = frozenset({"memory_call_budget", "auth_invalid"})
FINISHED_CODE = "auth_invalid"  # the token of a finished run

# A step of an operation: a function of the client that makes one call. An operation is a
# generator of steps, driven by `batch` with a Client and by `abatch` with an AsyncClient, so
# each operation is written once.
Step = Callable[[Any], Any]
Operation = Generator[Step, Any, Any]


def _digest(parts: Iterable[str], length: int) -> str:
    """A short name for `parts` in a tag: the item's own namespace and key are checked after
    the server answers, so a shared prefix could cost a page, never a wrong answer."""
    return hashlib.sha256(json.dumps(list(parts)).encode()).hexdigest()[:length]


def key_tag(namespace: tuple[str, ...], key: str) -> str:
    return "lgk:" + _digest([*namespace, "\x00", key], 16)


def prefix_tag(prefix: tuple[str, ...]) -> str:
    if not prefix:
        return MARKER_TAG
    return "lgp:" + _digest(prefix[:PREFIX_LEVELS], 10)


def encode(namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> dict[str, Any]:
    """The memory_write arguments of an item."""
    content = json.dumps(
        {"namespace": list(namespace), "key": key, "value": value}, ensure_ascii=False
    )
    summary = f"LangGraph · {'/'.join(namespace)} · {key}"
    if len(summary) > SUMMARY_MAX:
        summary = summary[: SUMMARY_MAX - 1] + "…"
    levels = [prefix_tag(namespace[:depth]) for depth in range(1, len(namespace) + 1)]
    tags = [MARKER_TAG, key_tag(namespace, key), *dict.fromkeys(levels[:PREFIX_LEVELS])]
    return {"kind": "fact", "content": content, "summary": summary, "tags": tags}


def decode(entry: Entry) -> tuple[tuple[str, ...], str, dict[str, Any]] | None:
    """An entry's namespace, key and value; None for a note that is not a store item (or
    was cut to fit a page)."""
    if entry.content_truncated:
        return None
    try:
        data = json.loads(entry.content)
        namespace, key, value = tuple(data["namespace"]), data["key"], data["value"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(key, str) or not isinstance(value, dict):
        return None
    if not all(isinstance(label, str) for label in namespace):
        return None
    return namespace, key, value


def _item(entry: Entry, decoded, cls=Item, **extra) -> Item:
    namespace, key, value = decoded
    created: datetime = entry.created_at
    return cls(
        namespace=namespace, key=key, value=value, created_at=created, updated_at=created,
        **extra,
    )  # fmt: skip


class MemoryPortalStore(BaseStore):
    """A LangGraph store over a Memory Portal server (module docstring)."""

    supports_ttl = False

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        task: str = "LangGraph store",
        task_key: str | None = None,
        scope: str = "project",
        timeout: float = 30.0,
        retries: int = 3,
    ) -> None:
        """`token`: an agent key (runs are started as needed) or a run token. `scope`:
        "project" (the project's agents see the items) or "application" (the agent's
        application only)."""
        if scope not in {"project", "application"}:
            raise ValueError('scope is "project" or "application".')
        self._settings = {"timeout": timeout, "retries": retries}
        self._base_url = base_url
        self._agent_key = token if token.startswith(KEY_PREFIX) else None
        self._run_token = None if self._agent_key else token
        self._run_id: str | None = None  # the run this store started with the key, if any
        self._task, self._task_key, self._scope = task, task_key, scope
        self._client: Client | None = None
        self._aclient: AsyncClient | None = None

    # --- BaseStore ------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._drive(self._operation(op)) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return [await self._adrive(self._operation(op)) for op in ops]

    def close(self) -> None:
        """Finish the run this store started (succeeded), then close its connections."""
        if self._client is not None:
            self._finish_run(self._client)
            self._client.close()

    async def aclose(self) -> None:
        if self._aclient is not None:
            await self._afinish_run(self._aclient)
            await self._aclient.aclose()

    # --- Driving an operation with a client -----------------------------------------------

    def _sync_client(self) -> Client:
        if self._client is None:
            self._client = Client(self._base_url, self._run_token or "", **self._settings)
        return self._client

    def _async_client(self) -> AsyncClient:
        if self._aclient is None:
            self._aclient = AsyncClient(self._base_url, self._run_token or "", **self._settings)
        return self._aclient

    def _renewable(self, error: MemoryPortalError) -> bool:
        return self._agent_key is not None and error.code in RENEW_CODES

    def _drive(self, operation: Operation) -> Any:
        client = self._sync_client()
        send, throw = operation.send, operation.throw
        try:
            step, renewed = next(operation), False
            while True:
                if self._run_token is None:
                    self._start_run(client)
                try:
                    result = step(client.with_token(self._run_token))
                except MemoryPortalError as error:
                    if self._renewable(error) and not renewed:
                        self._finish_run(client)
                        renewed = True
                        continue
                    step, renewed = throw(error), False
                    continue
                step, renewed = send(result), False
        except StopIteration as done:
            return done.value

    async def _adrive(self, operation: Operation) -> Any:
        client = self._async_client()
        send, throw = operation.send, operation.throw
        try:
            step, renewed = next(operation), False
            while True:
                if self._run_token is None:
                    await self._astart_run(client)
                try:
                    result = await step(client.with_token(self._run_token))
                except MemoryPortalError as error:
                    if self._renewable(error) and not renewed:
                        await self._afinish_run(client)
                        renewed = True
                        continue
                    step, renewed = throw(error), False
                    continue
                step, renewed = send(result), False
        except StopIteration as done:
            return done.value

    def _run_args(self) -> dict[str, Any]:
        return {"task": self._task, "task_key": self._task_key}

    def _start_run(self, client: Client) -> None:
        run = client.with_token(self._agent_key).start_run(**self._run_args())
        self._run_token, self._run_id = run.token, run.id

    async def _astart_run(self, client: AsyncClient) -> None:
        run = await client.with_token(self._agent_key).start_run(**self._run_args())
        self._run_token, self._run_id = run.token, run.id

    def _ending(self) -> tuple[str, str] | None:
        """The token and id of the run this store started, now let go of: the store's next
        call starts another. None when it started none (a run token is the caller's)."""
        if self._agent_key is None or self._run_id is None:
            return None
        ending = (self._run_token, self._run_id)
        self._run_token = self._run_id = None
        return ending

    def _finish_run(self, client: Client) -> None:
        """Finish the run this store started (its budget spent, or the store closing): it
        succeeded. One already finished (by a manager) is left as it is."""
        if (ending := self._ending()) is not None:
            token, run_id = ending
            try:
                client.with_token(token).report_run(run_id, status="succeeded")
            except MemoryPortalError as error:
                if error.code != FINISHED_CODE:
                    raise

    async def _afinish_run(self, client: AsyncClient) -> None:
        if (ending := self._ending()) is not None:
            token, run_id = ending
            try:
                await client.with_token(token).report_run(run_id, status="succeeded")
            except MemoryPortalError as error:
                if error.code != FINISHED_CODE:
                    raise

    # --- The operations, each written once ------------------------------------------------

    def _operation(self, op: Op) -> Operation:
        validate_op_namespace(op)  # LangGraph's own rule, for ops handed to batch directly
        if isinstance(op, GetOp):
            return self._get(op.namespace, op.key)
        if isinstance(op, PutOp):
            _check_namespace(op.namespace)
            if op.value is None:
                return self._delete(op.namespace, op.key)
            return self._put(op.namespace, op.key, dict(op.value))
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise ValueError(f"Unknown operation {type(op).__name__}.")

    def _versions(self, namespace: tuple[str, ...], key: str) -> Operation:
        """The live notes of an item, newest first, with their decoded (namespace, key,
        value)."""
        tag = key_tag(namespace, key)
        found: list[tuple[Entry, Any]] = []
        offset: int | None = 0
        while offset is not None:
            page: Page = yield lambda c, o=offset: c.memory_read(tag=tag, offset=o)
            for entry in page.entries:
                decoded = decode(entry)
                if decoded and decoded[0] == namespace and decoded[1] == key:
                    found.append((entry, decoded))
            offset = page.next_offset
        return found

    def _get(self, namespace: tuple[str, ...], key: str) -> Operation:
        versions = yield from self._versions(namespace, key)
        if not versions:
            return None
        entry, decoded = versions[0]
        return _item(entry, decoded)

    def _put(self, namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> Operation:
        arguments = {**encode(namespace, key, value), "scope": self._scope}
        versions = yield from self._versions(namespace, key)
        if versions and versions[0][1][2] == value:
            return None  # the newest version holds this value already
        try:
            written = yield lambda c: c.memory_write(**arguments)
            kept = written.id
        except MemoryPortalError as error:
            if error.code != "memory_forgotten":
                raise
            kept = yield from self._restore(arguments["content"], error)
        for entry, _ in versions:
            if entry.id != kept:
                try:
                    yield lambda c, i=entry.id: c.memory_forget(i)
                except MemoryPortalError as error:
                    if error.code != "memory_trust_locked":
                        raise
        return None

    def _restore(self, content: str, refusal: MemoryPortalError) -> Operation:
        """The value was forgotten before: bring back the agent's own forgotten note that
        holds it (a note forgotten out of the agent's reach stays refused)."""
        offset: int | None = 0
        while offset is not None:
            page: Page = yield lambda c, o=offset: c.memory_read(target="recoveries", offset=o)
            for recovery in page.entries:
                if recovery.content == content:
                    restored = yield lambda c, r=recovery.recovery_id: c.memory_restore(r)
                    return restored.id
            offset = page.next_offset
        raise refusal

    def _delete(self, namespace: tuple[str, ...], key: str) -> Operation:
        versions = yield from self._versions(namespace, key)
        for entry, _ in versions:
            yield lambda c, i=entry.id: c.memory_forget(i)
        return None

    def _scan(
        self, prefix: tuple[str, ...], query: str | None, wanted: Callable[[Any], bool], need: int
    ) -> Operation:
        """Up to `need` (entry, decoded) pairs under `prefix` that `wanted` accepts, one per
        key, in the server's order (newest first; best first for a query)."""
        tag = prefix_tag(prefix)
        seen: set[tuple[tuple[str, ...], str]] = set()
        found: list[tuple[Entry, Any]] = []
        offset: int | None = 0
        while offset is not None and len(found) < need:
            if query:
                page = yield lambda c, o=offset: c.memory_search(query, tag=tag, offset=o)
            else:
                page = yield lambda c, o=offset: c.memory_read(tag=tag, offset=o)
            for entry in page.entries:
                decoded = decode(entry)
                if not decoded or decoded[0][: len(prefix)] != prefix:
                    continue
                if (decoded[0], decoded[1]) in seen:
                    continue
                seen.add((decoded[0], decoded[1]))
                if wanted(decoded):
                    found.append((entry, decoded))
            offset = page.next_offset
        return found

    def _search(self, op: SearchOp) -> Operation:
        def wanted(decoded) -> bool:
            value = decoded[2]
            return not op.filter or all(
                _compare_values(value.get(k), v) for k, v in op.filter.items()
            )

        found = yield from self._scan(
            tuple(op.namespace_prefix), op.query, wanted, op.offset + op.limit
        )
        return [
            _item(entry, decoded, cls=SearchItem, score=None)
            for entry, decoded in found[op.offset : op.offset + op.limit]
        ]

    def _list_namespaces(self, op: ListNamespacesOp) -> Operation:
        conditions = op.match_conditions or ()
        exact = [c for c in conditions if c.match_type == "prefix" and "*" not in c.path]
        prefix = tuple(exact[0].path) if exact else ()
        found = yield from self._scan(prefix, None, lambda decoded: True, float("inf"))
        namespaces = {decoded[0] for _, decoded in found}
        namespaces = {ns for ns in namespaces if all(_does_match(c, ns) for c in conditions)}
        if op.max_depth is not None:
            namespaces = {ns[: op.max_depth] for ns in namespaces}
        return sorted(namespaces)[op.offset : op.offset + op.limit]


def _check_namespace(namespace: tuple[str, ...]) -> None:
    if not namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")
