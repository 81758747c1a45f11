"""Who is acting: a person (a Django user) or an agent (one run, bound by its token)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from .models import Agent, MemorySetting, Run


@dataclass(frozen=True)
class Actor:
    user: AbstractBaseUser | None = None
    run: Run | None = None
    can_write: bool = True
    # A person's role per project id, remembered for one request (access.actor_role); None:
    # look it up every time (an actor that outlives a request may see memberships change).
    roles: dict[int, str | None] | None = field(default=None, compare=False, repr=False)
    # An agent's project setting row as this request's token check read it (the API's actors
    # only): the switch the call is gated on and the epoch its write compares, read once per
    # request. None: read it when needed (an actor that outlives a request).
    setting: MemorySetting | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if (self.user is None) == (self.run is None):
            raise ValueError("An actor is either a person or an agent run, not both or neither.")

    @classmethod
    def person(
        cls, user: AbstractBaseUser, *, can_write: bool = True, for_request: bool = False
    ) -> Actor:
        """`for_request`: the actor of one request, which remembers the person's roles."""
        return cls(user=user, can_write=can_write, roles={} if for_request else None)

    @classmethod
    def agent_run(
        cls, run: Run, *, can_write: bool = True, setting: MemorySetting | None = None
    ) -> Actor:
        """`setting`: the run's project setting row read for this one request."""
        return cls(run=run, can_write=can_write, setting=setting)

    @property
    def is_agent(self) -> bool:
        return self.run is not None

    @property
    def is_person(self) -> bool:
        return self.user is not None

    @property
    def agent(self) -> Agent | None:
        return self.run.agent if self.run is not None else None

    @property
    def is_reviewer(self) -> bool:
        return self.run is not None and self.run.agent.is_reviewer

    @property
    def label(self) -> str:
        if self.user is not None:
            return self.user.get_username()
        return f"{self.run.agent.name} ({self.run.agent_id})"
