"""Export a project's memory as NDJSON and import it back (SPEC §3.5): one line per record, a
versioned header first, never a secret or a token. format.py is the format (its line models
validate an import and generate docs/export-format-v1.schema.json); export.py writes it;
checks.py reads and checks a whole file; importer.py writes a checked file."""

from .checks import ImportInvalid
from .export import project_export
from .format import FORMAT, VERSION, json_schema
from .importer import ImportJob, ImportReport, decoded_lines, project_import

__all__ = [
    "FORMAT",
    "VERSION",
    "decoded_lines",
    "ImportInvalid",
    "ImportJob",
    "ImportReport",
    "json_schema",
    "project_export",
    "project_import",
]
