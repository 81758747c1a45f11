"""`manage.py memory_import FILE [--project NEW-SLUG] [--grant-members]`: import an export, as
the operator (superuser). The whole file is checked first; a bad file is reported line by line
and nothing is written. Importing the same file twice changes nothing. Into a project the
import creates, the file's member lines give their roles only with --grant-members (without
it the import is refused, naming them); an existing project's members never change. Progress
goes to stderr."""

import sys
import time

from django.core.management.base import BaseCommand, CommandError

from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.portability import ImportInvalid, ImportJob, decoded_lines
from memory_portal.memory.progress import Progress


class Command(BaseCommand):
    help = "Import a project's memory from an NDJSON export (memory_export)."

    def add_arguments(self, parser):
        parser.add_argument("file", help="the .jsonl file ('-' for standard input)")
        parser.add_argument(
            "--project", metavar="NEW-SLUG", help="import into this project (ids are remapped)"
        )
        parser.add_argument(
            "--grant-members",
            action="store_true",
            help="give the file's members their roles in the project the import creates",
        )

    def handle(
        self, *args, file: str, project: str | None, grant_members: bool = False, **options
    ):
        started = time.monotonic()

        def say(phase: str) -> None:  # progress on stderr: stdout is the report
            self.stderr.write(f"[{time.monotonic() - started:6.1f} s] {phase}")

        try:
            say("reading and checking the file")
            if file == "-":
                lines = decoded_lines(sys.stdin.buffer)
            else:
                with open(file, "rb") as handle:
                    lines = decoded_lines(handle)
            job = ImportJob(
                actor=None, lines=lines, project_slug=project, grant_members=grant_members
            )
            say(f"checked {job.line_count:,} lines")
            with Progress("vectors", total=job.to_embed, unit="note", stream=self.stderr) as bar:
                for done, _ in job.embed():
                    bar.update(done - bar.done)
            say("writing, in one transaction")
            report = job.write()
        except OSError as exc:
            raise CommandError(f"Cannot read {file}: {exc.strerror}.") from exc
        except ImportInvalid as exc:
            for number, message in exc.errors:
                self.stderr.write(f"line {number}: {message}" if number else message)
            raise CommandError(f"{len(exc.errors)} problem(s); nothing was imported.") from exc
        except MemoryPortalError as err:
            raise CommandError(f"{err.message} {err.hint} Nothing was imported.") from err
        verb = "Created" if report.created_project else "Imported into"
        self.stdout.write(
            f"{verb} project {report.project}{' (ids remapped)' if report.remapped else ''}: "
            f"inserted {report.counts}, already there {report.unchanged}."
        )
        for name, role in report.members:
            self.stdout.write(f"  member added: {name} ({role})")
