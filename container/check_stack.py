"""What `make image-test` asks of the running stack, from outside it as a user would: /readyz
answers, a person logs in to the dashboard, an agent writes a note over the API, and the
worker container embeds it. Usage: check_stack.py BASE_URL USERNAME PASSWORD API_TOKEN, with
`sql` a command that runs one query in the database container (the embedding is not on the
API); exits non-zero, saying what failed."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import httpx
from memory_portal_client import Client


def step(what: str) -> None:
    print(f"-- {what}", flush=True)


def main(base: str, username: str, password: str, token: str, *sql: str) -> None:
    step("readyz")
    deadline = time.monotonic() + 120
    while True:
        try:
            ready = httpx.get(f"{base}/readyz", timeout=5)
            if ready.status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit("readyz never answered 200")
        time.sleep(2)
    print(ready.json())

    step("a person logs in")
    with httpx.Client(base_url=base, timeout=10) as browser:
        page = browser.get("/login/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        answer = browser.post(
            "/login/",
            data={"username": username, "password": password, "csrfmiddlewaretoken": csrf},
            headers={"Referer": f"{base}/login/"},
        )
        assert answer.status_code == 302, (answer.status_code, answer.text[:500])
        projects = browser.get("/")
        assert projects.status_code == 200 and username in projects.text, projects.text[:500]

    step("an agent writes a note over the API")
    with Client(base, token) as admin:
        admin.create_project("stack-check", "Stack check")
        admin.set_memory_enabled("stack-check", True)
        agent = admin.create_agent("stack-check", "Checker", "runtime")
        key = admin.create_agent_key("stack-check", agent, "image-test")
        with admin.with_token(key.key) as as_key:
            run = as_key.start_run(task="Check the container stack")
        with admin.for_run(run) as agent_client:
            written = agent_client.memory_write(
                "fact", "Preview environments are deleted 72 hours after the last push."
            )
    print(written.id, written.trust, written.status)

    step("the worker embeds it")
    query = f"select embedding_model from project_memory_entry where id = '{written.id}'"
    deadline = time.monotonic() + 120
    while True:
        model = subprocess.run(
            [*sql, query], capture_output=True, text=True, check=True
        ).stdout.strip()
        if model:
            print(f"embedded by {model}")
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"note {written.id} was not embedded within two minutes")
        time.sleep(2)


if __name__ == "__main__":
    main(*sys.argv[1:])
