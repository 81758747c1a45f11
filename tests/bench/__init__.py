"""Tests of the benchmarks and evaluations (`bench/`), whose commands are not installed in the
product's settings: they are called as command objects."""

from importlib import import_module


def command(name: str):
    """The `bench` command `name`, for `call_command(command(name), …)`."""
    return import_module(f"bench.management.commands.{name}").Command()
