"""`manage.py create_api_token` prints one usable token and nothing else."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from memory_portal.memory.tokens import token_authenticate


def test_create_api_token_prints_one_line(world):
    out = StringIO()
    call_command("create_api_token", world.manager.username, "--scope", "read", stdout=out)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    token = token_authenticate(lines[0])
    assert token.user == world.manager and token.scopes == ["read"]


def test_create_api_token_unknown_user(db):
    with pytest.raises(CommandError):
        call_command("create_api_token", "nobody")
