"""`Client` and `AsyncClient`: every route of the API as one method, the same for both.

The routes are written once, in `_Routes`: each method describes its call (`_Call`) and hands
it to `_send`, which `Client` carries out at once and `AsyncClient` as a coroutine. Refusals
raise `MemoryPortalError`; a 503 or 429 with `Retry-After` (nothing was written) is sent again
after the wait, `retries` times, and a connection that could not be opened likewise."""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Literal, Self
from urllib.parse import quote

import httpx

from . import models as m
from .errors import MemoryPortalError

__version__ = "0.1.0"

USER_AGENT = f"memory-portal-client/{__version__}"
RETRY_STATUSES = frozenset({429, 503})
CONNECT_BACKOFF = 0.5  # seconds before re-trying a connection that could not be opened


@dataclass(frozen=True)
class _Call:
    method: str
    path: str
    json: Any = None
    content: bytes | None = None
    params: Mapping[str, Any] | None = None
    parse: Callable[[Any], Any] | None = None  # the JSON body to the result; None: no body
    raw: bool = False  # answer the body's bytes (an export)


def _seg(value: str) -> str:
    """An id or slug as one path segment."""
    return quote(str(value), safe="")


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    return value


def _args(**arguments: Any) -> dict[str, Any]:
    """Keyword arguments as the API's JSON body: camelCase names, None left out."""
    return {m.wire_name(k): _jsonable(v) for k, v in arguments.items() if v is not None}


def _task(task: str | Mapping[str, str] | None) -> dict[str, str] | None:
    if task is None or isinstance(task, Mapping):
        return dict(task) if task is not None else None
    return {"title": task}


def _retry_after(response: httpx.Response) -> float | None:
    if response.status_code not in RETRY_STATUSES:
        return None
    try:
        return max(0.0, float(response.headers.get("Retry-After", "")))
    except ValueError:
        return None


def _result(call: _Call, response: httpx.Response) -> Any:
    if response.status_code >= 400:
        try:
            body = response.json()
        except ValueError:
            body = None
        raise MemoryPortalError.from_response(response.status_code, body, _retry_after(response))
    if call.raw:
        return response.content
    if call.parse is None:
        return None
    return call.parse(response.json())


def _read_result(body: dict[str, Any]) -> m.Page | m.DailyDates:
    return m.DailyDates.from_json(body) if "dates" in body else m.Page.from_json(body)


def _unreachable(base_url: str, exc: Exception) -> MemoryPortalError:
    code = "timeout" if isinstance(exc, httpx.TimeoutException) else "connection_failed"
    return MemoryPortalError(
        code,
        f"Could not reach {base_url}: {exc.__class__.__name__}: {exc}.",
        hint="Check the base URL and that the server is running; for a timeout, whether the "
        "call was applied (a write sent again is answered with the same id).",
    )


class _Routes:
    """The API's routes, one method each. `_send` is the transport's."""

    def _send(self, call: _Call) -> Any:  # pragma: no cover - each client has its own
        raise NotImplementedError

    # --- Agent tools (a run token) -------------------------------------------------------

    def list_tools(self) -> m.Tools:
        """The tools this run may use now, with each one's JSON Schema for a model."""
        return self._send(_Call("GET", "/api/tools", parse=m.Tools.from_json))

    def call_tool(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """A tool called with the arguments object exactly as a model emitted it; the answer
        as JSON (for an agent loop that hands both to the model)."""
        return self._send(
            _Call("POST", f"/api/tools/{_seg(name)}", json=dict(arguments), parse=lambda b: b)
        )

    def memory_write(
        self,
        kind: Literal["fact", "lesson", "decision", "navigation"],
        content: str,
        *,
        target: Literal["long_term", "daily"] | None = None,
        scope: Literal["project", "application"] | None = None,
        summary: str | None = None,
        tags: list[str] | None = None,
        date: date | None = None,
        evidence: Mapping[str, str] | None = None,
    ) -> m.WriteResult:
        body = _args(
            kind=kind, content=content, target=target, scope=scope, summary=summary,
            tags=tags, date=date, evidence=dict(evidence) if evidence else None,
        )  # fmt: skip
        return self._tool("memory_write", body, m.WriteResult.from_json)

    def memory_read(
        self,
        id: str | None = None,
        *,
        target: Literal["long_term", "daily", "list", "recoveries"] | None = None,
        kind: str | None = None,
        tag: str | None = None,
        date: date | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> m.Page | m.DailyDates:
        """One note by id, or a page (`DailyDates` for target "list")."""
        body = _args(
            id=id, target=target, kind=kind, tag=tag, date=date, limit=limit, offset=offset
        )
        return self._tool("memory_read", body, _read_result)

    def memory_search(
        self,
        query: str,
        *,
        kind: str | None = None,
        target: Literal["long_term", "daily"] | None = None,
        date: date | None = None,
        tag: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> m.Page:
        body = _args(
            query=query, kind=kind, target=target, date=date, tag=tag, limit=limit, offset=offset
        )
        return self._tool("memory_search", body, m.Page.from_json)

    def memory_status(self) -> m.Status:
        return self._tool("memory_status", {}, m.Status.from_json)

    def memory_forget(self, id: str) -> m.Forgotten:
        return self._tool("memory_forget", {"id": id}, m.Forgotten.from_json)

    def memory_restore(self, recovery_id: str) -> m.Restored:
        return self._tool("memory_restore", {"recoveryId": recovery_id}, m.Restored.from_json)

    def scratchpad(
        self,
        action: Literal["list", "add", "done", "undo", "clear"],
        *,
        text: str | None = None,
        item_id: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> m.Scratchpad:
        body = _args(action=action, text=text, item_id=item_id, limit=limit, offset=offset)
        return self._tool("scratchpad", body, m.Scratchpad.from_json)

    def _tool(self, name: str, body: dict[str, Any], parse: Callable[[Any], Any]) -> Any:
        return self._send(_Call("POST", f"/api/tools/{name}", json=body, parse=parse))

    # --- Agent memory v1 (a run token, or a person's naming agent_id) --------------------

    def save_fact(
        self,
        text: str,
        *,
        expires_at: datetime | None = None,
        supersedes: str | None = None,
        agent_id: str | None = None,
    ) -> m.Memory:
        body = _args(text=text, expires_at=expires_at, supersedes=supersedes, agent_id=agent_id)
        return self._send(_Call("POST", "/api/v1/memories", json=body, parse=m.Memory.from_json))

    def list_memories(
        self,
        *,
        agent_id: str | None = None,
        kind: Literal["fact", "day"] | None = None,
        status: Literal["active", "archived", "all"] | None = None,
        limit: int | None = None,
    ) -> list[m.Memory]:
        params = _args(agent_id=agent_id, kind=kind, status=status, limit=limit)
        return self._send(
            _Call(
                "GET", "/api/v1/memories", params=params,
                parse=lambda body: m.MemoryList.from_json(body).data,
            )
        )  # fmt: skip

    def append_day(self, line: str) -> m.Memory:
        """Appends `HH:MM TASK-KEY line` to today's day log (agents only)."""
        return self._send(
            _Call("POST", "/api/v1/memories/day", json={"line": line}, parse=m.Memory.from_json)
        )

    def recall(
        self, query: str | None = None, *, start: bool = False, agent_id: str | None = None
    ) -> m.Recall:
        body = _args(query=query, start=start or None, agent_id=agent_id)
        return self._send(
            _Call("POST", "/api/v1/memories/recall", json=body, parse=m.Recall.from_json)
        )

    def archive(self, memory_id: str, reason: str) -> m.Memory:
        path = f"/api/v1/memories/{_seg(memory_id)}/archive"
        return self._send(_Call("POST", path, json={"reason": reason}, parse=m.Memory.from_json))

    def unarchive(self, memory_id: str) -> m.Memory:
        path = f"/api/v1/memories/{_seg(memory_id)}/unarchive"
        return self._send(_Call("POST", path, json={}, parse=m.Memory.from_json))

    # --- Runs and agent keys -------------------------------------------------------------

    def start_run(
        self,
        *,
        project: str | None = None,
        agent_id: str | None = None,
        task_key: str | None = None,
        task: str | Mapping[str, str] | None = None,
        parent_run_id: str | None = None,
        scopes: list[str] | None = None,
    ) -> m.Run:
        """A new run and its token (`for_run` gives a client that calls as it). With an
        agent key, a run of the key's agent; with a manager's token, `project` and `agent_id`
        name it. `task` is a title, or {"title", "description"}."""
        body = _args(task_key=task_key, task=_task(task), parent_run_id=parent_run_id)
        if project is None:
            if agent_id is not None or scopes is not None:
                raise ValueError("agent_id and scopes go with project (a manager's token).")
            return self._send(_Call("POST", "/api/runs", json=body, parse=m.Run.from_json))
        if agent_id is None:
            raise ValueError("A manager starts a run of an agent: give agent_id.")
        body.update(_args(agent_id=agent_id, scopes=scopes))
        path = f"/api/admin/projects/{_seg(project)}/runs"
        return self._send(_Call("POST", path, json=body, parse=m.Run.from_json))

    def update_run(
        self,
        project: str,
        run_id: str,
        *,
        status: Literal["running", "succeeded", "failed"] | None = None,
        step: str | None = None,
    ) -> None:
        """The run's step, or its end: leaving `running` revokes its token at once."""
        path = f"/api/admin/projects/{_seg(project)}/runs/{_seg(run_id)}"
        return self._send(_Call("PATCH", path, json=_args(status=status, step=step)))

    def finish_run(
        self, project: str, run_id: str, status: Literal["succeeded", "failed"] = "succeeded"
    ) -> None:
        return self.update_run(project, run_id, status=status)

    def report_run(
        self,
        run_id: str,
        *,
        status: Literal["running", "succeeded", "failed"] | None = None,
        step: str | None = None,
    ) -> None:
        """With a run's own token (`for_run`), for a run an agent key started: its step, or
        its end — leaving `running` revokes the token at once. (`update_run` is a
        manager's.)"""
        path = f"/api/runs/{_seg(run_id)}"
        return self._send(_Call("PATCH", path, json=_args(status=status, step=step)))

    def delete_run(self, project: str, run_id: str) -> None:
        path = f"/api/admin/projects/{_seg(project)}/runs/{_seg(run_id)}"
        return self._send(_Call("DELETE", path))

    def revert_run(
        self,
        project: str,
        run_id: str,
        *,
        dry_run: bool = False,
        include_reviewed: list[str] | None = None,
        confirm: str | None = None,
    ) -> m.Revert:
        """A run's writes undone (`dry_run`: the preview, nothing changed)."""
        path = f"/api/admin/projects/{_seg(project)}/runs/{_seg(run_id)}/revert"
        body = _args(dry_run=dry_run, include_reviewed=include_reviewed, confirm=confirm)
        return self._send(_Call("POST", path, json=body, parse=m.Revert.from_json))

    def undo_revert(self, project: str, run_id: str) -> m.RevertUndo:
        path = f"/api/admin/projects/{_seg(project)}/runs/{_seg(run_id)}/revert/undo"
        return self._send(_Call("POST", path, json={}, parse=m.RevertUndo.from_json))

    def create_agent_key(self, project: str, agent_id: str, label: str) -> m.AgentKey:
        path = f"/api/admin/projects/{_seg(project)}/agents/{_seg(agent_id)}/keys"
        return self._send(_Call("POST", path, json={"label": label}, parse=m.AgentKey.from_json))

    def list_agent_keys(self, project: str, agent_id: str) -> list[m.AgentKeyRow]:
        path = f"/api/admin/projects/{_seg(project)}/agents/{_seg(agent_id)}/keys"
        return self._send(
            _Call("GET", path, parse=lambda body: m.AgentKeyList.from_json(body).keys)
        )

    def revoke_agent_key(self, project: str, agent_id: str, key_id: str) -> None:
        path = f"/api/admin/projects/{_seg(project)}/agents/{_seg(agent_id)}/keys/{_seg(key_id)}"
        return self._send(_Call("DELETE", path))

    # --- Projects, people, applications, agents ------------------------------------------

    def create_project(self, id: str, name: str = "") -> str:
        body = {"id": id, "name": name}
        return self._send(_Call("POST", "/api/admin/projects", json=body, parse=_created_id))

    def delete_project(self, project: str, *, confirm: str) -> dict[str, Any]:
        """Deletes the project and everything in it; `confirm` must repeat its id."""
        path = f"/api/admin/projects/{_seg(project)}"
        return self._send(
            _Call("DELETE", path, params={"confirm": confirm}, parse=lambda body: body)
        )

    def add_member(
        self, project: str, username: str, role: Literal["member", "manager"] = "member"
    ) -> m.Member:
        path = f"/api/admin/projects/{_seg(project)}/members"
        body = {"username": username, "role": role}
        return self._send(_Call("POST", path, json=body, parse=m.Member.from_json))

    def list_members(self, project: str) -> list[m.Member]:
        """The project's members and roles, managers first."""
        path = f"/api/admin/projects/{_seg(project)}/members"
        return self._send(
            _Call("GET", path, parse=lambda body: m.MemberList.from_json(body).members)
        )

    def remove_member(self, project: str, username: str) -> None:
        """Take a person out of the project; never its last manager (`project_last_manager`)."""
        path = f"/api/admin/projects/{_seg(project)}/members/{_seg(username)}"
        return self._send(_Call("DELETE", path))

    def list_people(self) -> list[m.Person]:
        """Every person of the server (administrators)."""
        return self._send(
            _Call("GET", "/api/admin/people", parse=lambda body: m.People.from_json(body).people)
        )

    def update_person(
        self, username: str, *, active: bool | None = None, administrator: bool | None = None
    ) -> m.Person:
        """Switch a person off or on, make or unmake an administrator (administrators; never
        oneself). Switched off, their API tokens stop at once."""
        body = {k: v for k, v in {"active": active, "administrator": administrator}.items()
                if v is not None}  # fmt: skip
        path = f"/api/admin/people/{_seg(username)}"
        return self._send(_Call("PATCH", path, json=body, parse=m.Person.from_json))

    def list_runs(
        self, project: str, *, limit: int | None = None, offset: int | None = None, **filters: Any
    ) -> m.RunList:
        """A page of the project's runs, newest first. `filters` are the Runs tab's: agent,
        status, task_key, started_from, started_to."""
        params = {
            k: _jsonable(v)
            for k, v in {**filters, "limit": limit, "offset": offset}.items()
            if v is not None
        }
        path = f"/api/admin/projects/{_seg(project)}/runs"
        return self._send(_Call("GET", path, params=params, parse=m.RunList.from_json))

    def create_application(self, project: str, id: str, name: str = "") -> str:
        path = f"/api/admin/projects/{_seg(project)}/applications"
        return self._send(_Call("POST", path, json={"id": id, "name": name}, parse=_created_id))

    def create_repository(self, id: str, path: str) -> str:
        body = {"id": id, "path": path}
        return self._send(_Call("POST", "/api/admin/repositories", json=body, parse=_created_id))

    def link_repository(
        self, project: str, application_id: str, repository_id: str, revision: str
    ) -> m.RepositoryLink:
        path = (
            f"/api/admin/projects/{_seg(project)}/applications/{_seg(application_id)}"
            f"/repositories/{_seg(repository_id)}"
        )
        return self._send(
            _Call("PUT", path, json={"revision": revision}, parse=m.RepositoryLink.from_json)
        )

    def create_agent(
        self,
        project: str,
        name: str,
        stage: Literal["assess", "understand", "design", "implement", "review", "runtime"],
        *,
        application_id: str | None = None,
    ) -> str:
        """A new agent of the project; its `agt_` id."""
        path = f"/api/admin/projects/{_seg(project)}/agents"
        body = _args(name=name, stage=stage, application_id=application_id)
        return self._send(_Call("POST", path, json=body, parse=_created_id))

    def update_agent(
        self,
        project: str,
        agent_id: str,
        *,
        name: str | None = None,
        stage: str | None = None,
        trusted: bool | None = None,
    ) -> None:
        """Rename an agent, change its stage (what it is offered from its next call on) and /
        or trust it (under the review policy `hold`, its notes reach other runs at once)."""
        path = f"/api/admin/projects/{_seg(project)}/agents/{_seg(agent_id)}"
        body = _args(name=name, stage=stage, trusted=trusted)
        return self._send(_Call("PATCH", path, json=body))

    def retire_agent(self, project: str, agent_id: str) -> None:
        path = f"/api/admin/projects/{_seg(project)}/agents/{_seg(agent_id)}/retire"
        return self._send(_Call("POST", path, json={}))

    # --- A project's memory, for people --------------------------------------------------

    def project_memory(
        self, project: str, *, limit: int | None = None, offset: int | None = None, **filters: Any
    ) -> m.ProjectMemory:
        """A page of the project's notes, newest first. `filters` are the notes table's:
        q, trust, status, kind, target, scope, application, agent, created_by, run, tag,
        created_from, created_to, day, expired, evidence_stale, day_log, rejected, vetoed,
        not_recalled (booleans as True / False)."""
        params = {
            k: ("true" if v is True else "false" if v is False else _jsonable(v))
            for k, v in {**filters, "limit": limit, "offset": offset}.items()
            if v is not None
        }
        path = f"/api/admin/projects/{_seg(project)}/memory"
        return self._send(_Call("GET", path, params=params, parse=m.ProjectMemory.from_json))

    def set_memory_enabled(self, project: str, enabled: bool) -> None:
        path = f"/api/admin/projects/{_seg(project)}/memory"
        return self._send(_Call("PUT", path, json={"enabled": enabled}))

    def set_review_policy(self, project: str, policy: Literal["open", "hold"]) -> None:
        """`hold`: an agent's learned note reaches other runs once a person reviews it."""
        path = f"/api/admin/projects/{_seg(project)}/memory"
        return self._send(_Call("PUT", path, json={"reviewPolicy": policy}))

    def reset_memory(self, project: str) -> None:
        """Deletes every note, recovery record and scratchpad item of the project."""
        return self._send(_Call("DELETE", f"/api/admin/projects/{_seg(project)}/memory"))

    def review(
        self,
        project: str,
        note_id: str,
        state: Literal["approved", "rejected", "learned"],
        reason: str | None = None,
    ) -> None:
        """Approve or reject a note (a rejection may say why, one line), or take either back
        (`learned`)."""
        path = f"/api/admin/projects/{_seg(project)}/memory/{_seg(note_id)}"
        body = {"state": state, **({"reason": reason} if reason else {})}
        return self._send(_Call("PATCH", path, json=body))

    def veto(self, project: str, note_id: str, reason: str | None = None) -> m.NoteState:
        """Veto a note; `reason` (one line) is shown on it and to its agent."""
        path = f"/api/admin/projects/{_seg(project)}/memory/{_seg(note_id)}/veto"
        body = {"reason": reason} if reason else {}
        return self._send(_Call("POST", path, json=body, parse=m.NoteState.from_json))

    def undo_veto(self, project: str, note_id: str) -> m.NoteState:
        path = f"/api/admin/projects/{_seg(project)}/memory/{_seg(note_id)}/undo"
        return self._send(_Call("POST", path, json={}, parse=m.NoteState.from_json))

    def forget_note(self, project: str, note_id: str) -> m.Forgotten:
        path = f"/api/admin/projects/{_seg(project)}/memory/{_seg(note_id)}/forget"
        return self._send(_Call("POST", path, json={}, parse=m.Forgotten.from_json))

    def restore_note(self, project: str, recovery_id: str) -> str:
        path = f"/api/admin/projects/{_seg(project)}/memory/recoveries/{_seg(recovery_id)}/restore"
        return self._send(_Call("POST", path, json={}, parse=_created_id))

    def export_project(self, project: str) -> bytes:
        """The project's memory as NDJSON (`import_file` takes it back)."""
        path = f"/api/admin/projects/{_seg(project)}/export"
        return self._send(_Call("GET", path, raw=True))

    def import_file(
        self,
        data: bytes,
        *,
        project: str | None = None,
        dry_run: bool = False,
        grant_members: bool = False,
    ) -> m.ImportResult:
        """An export imported (administrators); `project`: into a new project of that id.
        `dry_run`: checked only, answering what it would do (`members` it would add);
        `grant_members`: confirms those members for a project the import creates (without
        it such an import is refused, `import_members_unconfirmed`)."""
        params = {
            **({"project": project} if project else {}),
            **({"dryRun": "true"} if dry_run else {}),
            **({"grantMembers": "true"} if grant_members else {}),
        } or None
        return self._send(
            _Call(
                "POST", "/api/admin/import", content=data, params=params,
                parse=m.ImportResult.from_json,
            )
        )  # fmt: skip


def _created_id(body: dict[str, Any]) -> str:
    return m.Created.from_json(body).id


class _Settings:
    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float,
        retries: int,
        max_retry_wait: float,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, not {base_url!r}.")
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.max_retry_wait = max_retry_wait

    def with_token(self, token: str) -> Self:
        """The same server and settings with another token (sharing the connections)."""
        other = copy.copy(self)
        other.token, other._owns_http = token, False
        return other

    def for_run(self, run: m.Run) -> Self:
        """The client that calls as `run` (its token)."""
        return self.with_token(run.token)

    def _args(self, call: _Call) -> dict[str, Any]:
        """The request's headers, query and body."""
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        args: dict[str, Any] = {"headers": headers, "params": call.params}
        if call.content is not None:
            headers["Content-Type"] = "application/x-ndjson"
            args["content"] = call.content
        elif call.json is not None:
            headers["Content-Type"] = "application/json"
            args["content"] = json.dumps(call.json).encode()
        return args

    def _after(
        self,
        call: _Call,
        attempt: int,
        response: httpx.Response | None,
        error: httpx.TransportError | None,
    ) -> tuple[float | None, Any]:
        """After attempt `attempt` (from 0): `(seconds, None)` to wait and send again, or
        `(None, result)`; a refusal or an unreachable server raises. Sent again: a 503 / 429
        with Retry-After (the server wrote nothing), and a connection never opened (nothing
        was sent); never a timeout, which may have been applied."""
        if error is not None:
            if isinstance(error, httpx.ConnectError) and attempt < self.retries:
                return CONNECT_BACKOFF * (attempt + 1), None
            raise _unreachable(self.base_url, error) from None
        wait = _retry_after(response)
        if wait is not None and attempt < self.retries:
            return min(wait, self.max_retry_wait), None
        return None, _result(call, response)


class Client(_Settings, _Routes):
    """The API over HTTP, one call at a time.

        with Client("http://127.0.0.1:8000", token) as portal:
            portal.memory_write("fact", "The staging database is restored nightly at 02:00.")

    `retries`: how many times a 503 / 429 with Retry-After, or a refused connection, is sent
    again (waiting what the server asked, at most `max_retry_wait` seconds) before the error
    is raised."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        max_retry_wait: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(
            base_url, token, timeout=timeout, retries=retries, max_retry_wait=max_retry_wait
        )
        self._http = httpx.Client(
            base_url=self.base_url,
            timeout=timeout,
            transport=transport,
            headers={"User-Agent": USER_AGENT},
        )
        self._owns_http = True

    def _send(self, call: _Call) -> Any:
        for attempt in itertools.count():
            try:
                response, error = (
                    self._http.request(call.method, call.path, **self._args(call)),
                    None,
                )
            except httpx.TransportError as exc:
                response, error = None, exc
            wait, result = self._after(call, attempt, response, error)
            if wait is None:
                return result
            time.sleep(wait)

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncClient(_Settings, _Routes):
    """The same methods as `Client`, each a coroutine:

    async with AsyncClient("http://127.0.0.1:8000", token) as portal:
        page = await portal.memory_search("staging database")
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        max_retry_wait: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(
            base_url, token, timeout=timeout, retries=retries, max_retry_wait=max_retry_wait
        )
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=timeout,
            transport=transport,
            headers={"User-Agent": USER_AGENT},
        )
        self._owns_http = True

    async def _send(self, call: _Call) -> Any:  # type: ignore[override]
        for attempt in itertools.count():
            try:
                response = await self._http.request(call.method, call.path, **self._args(call))
                error = None
            except httpx.TransportError as exc:
                response, error = None, exc
            wait, result = self._after(call, attempt, response, error)
            if wait is None:
                return result
            await asyncio.sleep(wait)

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
