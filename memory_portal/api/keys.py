"""`POST /api/runs`: an agent key starts a run of its agent and gets the run's token (SPEC
§3.4a), for scripts and frameworks that want one run per task; `PATCH /api/runs/{runId}`: such
a run reports its step and its end with its own token (the key's holder is its orchestrator).
The other place a key is taken is `/mcp` (api/mcp_server.py); everywhere else it is a 401
naming these two."""

from __future__ import annotations

from ninja import Router
from ninja.responses import Status

from memory_portal.memory import selectors, services
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.models import AgentKey
from memory_portal.memory.tokens import is_agent_key, key_authenticate

from . import schemas as s
from .auth import BearerAuth
from .schemas import responses


class KeyAuth(BearerAuth):
    """The Authorization header read as BearerAuth reads it, taking an agent key only."""

    openapi_description = (
        "An agent key (mpk_…): a long-lived credential of one agent that only starts runs. "
        "It is taken here and as the bearer of /mcp (each MCP session is one run of the "
        "agent); anywhere else it is a 401. Managers create, list and revoke keys at "
        "/api/admin/projects/{projectId}/agents/{agentId}/keys."
    )

    def authenticate(self, request, token: str) -> AgentKey:
        if not is_agent_key(token):
            raise MemoryPortalError(
                "auth_invalid",
                "POST /api/runs takes an agent key (mpk_…).",
                hint="Create one on the project's Connect page; an orchestrator with a "
                "manager's token starts runs with POST /api/admin/projects/{projectId}/runs.",
            )
        return key_authenticate(token)


router = Router(tags=["agent keys"], auth=KeyAuth())


@router.post("", response=responses({201: s.RunOut}), url_name="runs-start", summary="Start a run")
def run_start(request, body: s.RunStartIn):
    """Start a run of the key's agent (nested under `parentRunId` when given) and answer its
    token, shown once: the run token is what the tools, v1 and `/mcp` take. Every run rule
    holds: its note quota, its call budget, and its token stops working when the run is
    finished (a manager's `PATCH /api/admin/projects/{projectId}/runs/{runId}`)."""
    key: AgentKey = request.auth
    run, plaintext = services.key_run_start(
        key=key,
        parent_id=body.parentRunId,
        task_key=body.taskKey or "",
        task_title=body.task.title if body.task else "",
        task_description=(body.task.description or "") if body.task else "",
    )
    return Status(
        201,
        {
            "id": run.id,
            "token": plaintext,
            "topLevelRunId": run.top_level_run_id,
            "scopes": ["read", "write"],
        },
    )


@router.patch(
    "/{run_id}",
    auth=BearerAuth(),
    response=responses({204: None}),
    url_name="runs-report",
    summary="Report a run's step or end, with its own token",
)
def run_report(request, run_id: str, body: s.RunStatusIn):
    """A run started with an agent key (above) reports the step it is in and its end with its
    own run token, as an orchestrator does with a manager's token: `status` `succeeded` or
    `failed` finishes it, and the token stops working at once (a manager may still correct
    the final status). A run a manager started is refused (`memory_forbidden`): its
    orchestrator reports on it. Not counted against the run's call budget."""
    run = selectors.own_run(actor=request.auth, run_id=run_id)
    services.run_update(actor=request.auth, run=run, status=body.status, step=body.step)
    return Status(204, None)
