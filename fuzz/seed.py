"""The fuzz run's data, made through the services in the fuzz database (run as a subprocess
with the server's environment): a project with memory on, an application with a linked git
repository, agents, a run with its token, a superuser's token, notes of every kind, a
forgotten note and a scratchpad item. Prints the ids and tokens the fuzzers use, as JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import django


def git_repository(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "fuzz", "GIT_AUTHOR_EMAIL": "fuzz@example.com"}
    env |= {"GIT_COMMITTER_NAME": "fuzz", "GIT_COMMITTER_EMAIL": "fuzz@example.com"}
    (path / "README.md").write_text("The staging deploy needs the VPN switched on first.\n")
    for args in (["init", "-q"], ["add", "README.md"], ["commit", "-q", "-m", "first"]):
        subprocess.run(["git", *args], cwd=path, env=env, check=True)
    return path


def main() -> None:
    django.setup()
    from django.contrib.auth import get_user_model

    from memory_portal.memory import services
    from memory_portal.memory.actors import Actor
    from memory_portal.memory.models import Role, Stage

    password = sys.argv[1]
    repo_path = git_repository(Path(sys.argv[2]))
    admin = get_user_model().objects.create_superuser("fuzz-admin", "fuzz@example.com", password)
    project = services.project_create(actor=None, slug="fuzz-web", name="Fuzz Web")
    services.membership_set(actor=None, project=project, user=admin, role=Role.MANAGER)
    services.memory_enable(actor=Actor.person(admin), project=project)
    app = services.application_create(actor=None, project=project, slug="storefront", name="Shop")
    repository = services.repository_create(actor=None, slug="shop-repo", path=str(repo_path))
    services.repository_link_set(
        actor=None, application=app, repository=repository, revision="HEAD"
    )
    agent = services.agent_create(
        actor=None, project=project, name="Runtime helper", stage=Stage.RUNTIME, application=app
    )
    services.agent_create(actor=None, project=project, name="Reviewer", stage=Stage.REVIEW)
    run, agent_token = services.run_start(actor=None, agent=agent, task_key="FUZZ-1")
    as_agent = Actor.agent_run(run)
    notes = [
        services.note_write(actor=as_agent, kind=kind, content=f"A {kind} about the deploy").note
        for kind in ("fact", "lesson", "decision", "navigation")
    ]
    forgotten = services.note_write(actor=as_agent, kind="fact", content="Forget me").note
    recovery = services.note_forget(actor=as_agent, note_id=forgotten.pk)
    fact = services.fact_save(actor=as_agent, text="The VPN is needed for staging").note
    day = services.day_append(actor=as_agent, line="fact: staging restarts at 02:00 UTC")
    item = services.scratchpad_add(actor=as_agent, text="check the deploy")
    print(
        json.dumps(
            {
                "agent_token": agent_token,
                "admin_token": services.token_create(actor=None, user=admin)[1],
                "username": admin.username,
                "project": project.slug,
                "application": app.slug,
                "repository": repository.slug,
                "agent": agent.pk,
                "run": run.pk,
                "notes": [n.pk for n in notes] + [fact.pk, day.pk],
                "recovery": recovery.pk,
                "item": item.pk,
            }
        )
    )


if __name__ == "__main__":
    main()
