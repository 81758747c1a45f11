"""What the delete commands share: the arguments (the ids, then `--confirm` repeating the
last), the service's refusal as a command error, and the counts printed one per line
(`notes: 3`), the way the audit event records them."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from memory_portal.memory.errors import MemoryPortalError


def refusal(err: MemoryPortalError) -> CommandError:
    return CommandError(f"{err.code}: {err.message} ({err.hint})")


def write_counts(stdout, heading: str, counts: dict) -> None:
    stdout.write(heading)
    for key, value in counts.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items())
        stdout.write(f"  {key}: {value}")


class DeleteCommand(BaseCommand):
    """A delete command: `ids` are its positional arguments (slugs), the last one is what it
    deletes and what `--confirm` repeats; a subclass finds the row and calls the service."""

    ids: tuple[str, ...] = ()

    def add_arguments(self, parser):
        for name in self.ids:
            parser.add_argument(name, help=f"the {name} id (slug)")
        what = self.ids[-1]
        parser.add_argument(
            "--confirm", required=True, metavar=what.upper(), help=f"the {what} id again"
        )

    def handle(self, *args, confirm: str, **options):
        slugs = [options[name] for name in self.ids]
        target = self.find(*slugs)
        if target is None:
            raise CommandError(self.missing(*slugs))
        try:
            counts = self.delete(target, confirm=confirm)
        except MemoryPortalError as err:
            raise refusal(err) from err
        write_counts(self.stdout, f"Deleted {self.ids[-1]} {'/'.join(slugs)}:", counts)

    def find(self, *slugs: str):
        raise NotImplementedError

    def missing(self, *slugs: str) -> str:
        raise NotImplementedError

    def delete(self, target, *, confirm: str) -> dict:
        raise NotImplementedError
