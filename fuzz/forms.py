"""Hypothesis against the dashboard of a live server: every page with random query strings
(page numbers, sorting, filters) and every form with random fields — text with NUL and control
characters, raw bytes that are not UTF-8, huge and negative numbers, long strings, malformed ids
— plus the login form. Nothing may answer 5xx. Returns one line per distinct failure."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from urllib.parse import quote, quote_from_bytes

import requests
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

# A field's value: what a browser sends and what it never would.
TEXT = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=300),
    st.sampled_from(["\x00", "a\x00b", "\ufeff", "\u202e", "' OR 1=1 --", "<script>", "%", "\\"]),
    st.integers().map(str),
    st.sampled_from(["99999999999999999999", "-99999999999999999999", "1e309", "NaN", "-1"]),
    st.builds(lambda n: "x" * n, st.integers(min_value=1_000, max_value=120_000)),
)
RAW = st.binary(max_size=60)  # percent-encoded as is: often not UTF-8 at all
# The longest response header a proxy in front passes: nginx's default buffer is 4 KB or 8 KB.
HEADER_MAX = 4096


@st.composite
def value(draw) -> str:
    """A field's value, already percent-encoded for a query string or a form body."""
    if draw(st.integers(0, 4)) == 0:
        return quote_from_bytes(draw(RAW), safe="")
    return quote(draw(TEXT), safe="")


@dataclass
class Target:
    method: str
    path: str
    fields: list[str]


@dataclass
class Found:
    failures: dict[str, str] = field(default_factory=dict)
    requests: int = 0

    def record(self, target: Target, body: str, response: requests.Response | Exception) -> None:
        """A 5xx, an answer the client could not read, or a header past what a proxy passes
        (nginx's default buffer: HEADER_MAX bytes) is a failure."""
        self.requests += 1
        if isinstance(response, Exception):
            failure = f"no readable answer ({type(response).__name__}: {str(response)[:120]})"
        elif response.status_code >= 500:
            failure = str(response.status_code)
        elif (size := max((len(v) for v in response.headers.values()), default=0)) > HEADER_MAX:
            failure = f"a response header of {size:,} bytes"
        else:
            return
        key = f"{target.method} {re.sub(r'(mem|agt|run|rec)_[0-9a-z]+', r'\1_…', target.path)}"
        self.failures.setdefault(key, f"{failure} for {body[:160]!r}")


def targets(seeded: dict) -> list[Target]:
    p = f"/p/{seeded['project']}"
    note, agent, run = seeded["notes"][0], seeded["agent"], seeded["run"]
    recovery = seeded["recovery"]
    note_filters = [
        "q", "trust", "status", "kind", "target", "scope", "application", "agent", "run", "tag",
        "created_from", "created_to", "expired", "evidence_stale", "page", "per_page", "sort",
    ]  # fmt: skip
    return [
        Target("GET", f"{p}/", note_filters),
        Target("GET", f"{p}/agents/{agent}/", note_filters),
        Target("GET", f"{p}/agents/{agent}/recall/", ["query"]),
        Target("GET", f"{p}/runs/", ["page", "per_page", "sort"]),
        Target("GET", f"{p}/runs/{run}/", ["page", "per_page", "sort"]),
        Target("GET", f"{p}/recoveries/", ["page"]),
        Target("GET", f"{p}/review/", ["next"]),
        Target("GET", f"{p}/notes/{note}/", ["next"]),
        Target("GET", "/audit/", ["project", "actor", "action", "date_from", "date_to", "page"]),
        Target("POST", f"{p}/notes/bulk/", ["action", "ids", "ids", "next"]),
        Target("POST", f"{p}/notes/{note}/archive/", ["reason", "next"]),
        Target("POST", f"{p}/notes/{note}/edit/", ["content", "next"]),
        Target("POST", f"{p}/notes/{note}/veto/", ["next"]),
        Target("POST", f"{p}/notes/{note}/undo/", ["next"]),
        Target("POST", f"{p}/agents/{agent}/facts/", ["text"]),
        Target("POST", f"{p}/agents/{agent}/routine/run/", []),
        Target("POST", f"{p}/review/lift/", ["note", "line", "next"]),
        Target("POST", f"{p}/recoveries/{recovery}/restore/", ["from", "next"]),
        Target("POST", f"{p}/memory/reset/", ["confirm_slug"]),
        Target("POST", f"{p}/applications/{seeded['application']}/delete/", ["confirm"]),
        Target("POST", f"{p}/runs/{run}/status/", ["status"]),
        Target("POST", f"{p}/connect/", ["agent", "name", "stage", "application", "label"]),
        Target("POST", f"{p}/runs/{run}/delete/", ["confirm"]),
    ]


def logged_in(base: str, username: str, password: str) -> requests.Session:
    session = requests.Session()
    session.get(f"{base}/login/", timeout=30)
    answer = session.post(
        f"{base}/login/",
        data={
            "username": username,
            "password": password,
            "csrfmiddlewaretoken": session.cookies["csrftoken"],
        },
        timeout=30,
        allow_redirects=False,
    )
    if answer.status_code != 302:
        raise RuntimeError(f"the fuzz login failed: {answer.status_code}")
    return session


def _fuzz_target(
    base, session, target: Target, found: Found, *, until: float, examples: int, rng_seed: int
):
    """Random values for one page's query string or one form's fields, with htmx or without."""
    size = len(target.fields)

    @seed(rng_seed)
    @settings(
        max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(values=st.lists(value(), min_size=size, max_size=size), htmx=st.booleans())
    def one(values, htmx):
        if time.monotonic() > until:
            return
        pairs = "&".join(f"{name}={v}" for name, v in zip(target.fields, values, strict=True))
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if htmx:
            headers["HX-Request"] = "true"
        try:
            if target.method == "GET":
                response = session.get(f"{base}{target.path}?{pairs}", headers=headers, timeout=60)
            else:
                body = f"csrfmiddlewaretoken={session.cookies.get('csrftoken', '')}&{pairs}"
                response = session.post(
                    f"{base}{target.path}", data=body, headers=headers, timeout=60,
                    allow_redirects=False,
                )  # fmt: skip
        except requests.RequestException as exc:
            response = exc
        found.record(target, pairs, response)

    one()


def fuzz_forms(
    base: str, seeded: dict, password: str, *, seconds: float, examples: int, rng_seed: int
) -> Found:
    found = Found()
    session = logged_in(base, seeded["username"], password)
    deadline = time.monotonic() + seconds
    plan = targets(seeded)
    per_target = max(1, seconds / (len(plan) + 1))

    for target in plan:
        until = min(deadline, time.monotonic() + per_target)
        _fuzz_target(
            base, session, target, found, until=until, examples=examples, rng_seed=rng_seed
        )

    # The login form, from a fresh client each time (the throttle answers 429 soon: fine).
    login = Target("POST", "/login/", ["username", "password"])

    @seed(rng_seed)
    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(username=value(), password=value())
    def attempt(username, password):
        if time.monotonic() > deadline + per_target:
            return
        client = requests.Session()
        client.get(f"{base}/login/", timeout=30)
        body = (
            f"csrfmiddlewaretoken={client.cookies.get('csrftoken', '')}"
            f"&username={username}&password={password}"
        )
        response = client.post(
            f"{base}/login/", data=body, timeout=60, allow_redirects=False,
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )  # fmt: skip
        found.record(login, body, response)

    attempt()
    return found
