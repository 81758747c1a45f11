"""Evidence checks (SPEC §2.7): a cited path is a regular file at the pinned revision."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from dataclasses import dataclass

from memory_portal.memory import deadline
from memory_portal.memory.errors import MemoryPortalError

MAX_FILE_BYTES = 512_000
QUOTE_MIN, QUOTE_MAX = 12, 400

# Matches the evidence_path column, so a verified path always fits where it is stored.
MAX_PATH_CHARS = 1000
# A revision is a ref name or SHA; anything longer is not worth handing to git.
MAX_REVISION_CHARS = 256

DEFAULT_GIT_BINARY = "git"
DEFAULT_GIT_TIMEOUT_SECONDS = 10

REGULAR_FILE_MODES = frozenset({"100644", "100755"})
_FULL_OID = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")  # SHA-1 or SHA-256 repositories

FIELD_REPOSITORY = "evidence.repositoryId"
FIELD_PATH = "evidence.path"
FIELD_QUOTE = "evidence.quote"


@dataclass(frozen=True)
class VerifiedEvidence:
    commit: str  # full 40-hex SHA that `revision` resolved to
    path: str  # normalised relative path
    quote: str  # "" when none


def _refuse(reason: str, message: str, *, field: str, hint: str) -> MemoryPortalError:
    return MemoryPortalError(
        "memory_evidence_invalid", message, reason=reason, field=field, hint=hint
    )


def _unreadable() -> MemoryPortalError:
    return _refuse(
        "repository_unreadable",
        "The evidence repository could not be read.",
        field=FIELD_REPOSITORY,
        hint="Check that the repository path is a readable git repository.",
    )


def _git_config() -> tuple[str, float]:
    """The git binary and timeout from settings.MEMORY_PORTAL, or defaults outside Django."""
    binary, timeout = DEFAULT_GIT_BINARY, DEFAULT_GIT_TIMEOUT_SECONDS
    try:
        # Imported lazily so the checks also work where Django settings are not configured.
        from django.conf import settings
        from django.core.exceptions import ImproperlyConfigured

        try:
            conf = getattr(settings, "MEMORY_PORTAL", None) or {}
        except ImproperlyConfigured:
            conf = {}
    except ImportError:
        conf = {}
    if isinstance(conf.get("GIT_BINARY"), str) and conf["GIT_BINARY"]:
        binary = conf["GIT_BINARY"]
    configured_timeout = conf.get("GIT_TIMEOUT_SECONDS")
    if (
        isinstance(configured_timeout, int | float)
        and not isinstance(configured_timeout, bool)
        and configured_timeout > 0
    ):
        timeout = configured_timeout
    return binary, timeout


def _git_env(repo_dir: str) -> dict[str, str]:
    # An inherited GIT_DIR, GIT_WORK_TREE or GIT_INDEX_FILE would make git read some other
    # repository than the one named, so every GIT_* variable from the server is dropped.
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(
        {
            "GIT_TERMINAL_PROMPT": "0",
            # Stops discovery at the named folder: a plain folder inside some other repository
            # must be refused, not silently read as that outer repository.
            "GIT_CEILING_DIRECTORIES": os.path.dirname(repo_dir),
            # Replace refs would let the objects read differ from the SHA that gets recorded.
            "GIT_NO_REPLACE_OBJECTS": "1",
            # A partial clone must not reach the network to fetch a missing blob.
            "GIT_NO_LAZY_FETCH": "1",
        }
    )
    return env


def _run_git(repo_dir: str, *args: str) -> subprocess.CompletedProcess[bytes] | None:
    """Run git read-only against repo_dir; None when git could not run or timed out."""
    binary, timeout = _git_config()
    command = [
        binary,
        "-c",
        "safe.directory=*",
        # A repository's own config must not start an fsmonitor hook on the server.
        "-c",
        "core.fsmonitor=false",
        "--literal-pathspecs",
        "-C",
        repo_dir,
        *args,
    ]
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_git_env(repo_dir),
            # Its own process group, so a timeout also ends anything git started.
            start_new_session=True,
        )
    except (OSError, ValueError):
        return None
    try:
        stdout, stderr = process.communicate(timeout=deadline.seconds(timeout))
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        if deadline.expired():  # cut short by the call's own bound: retryable, not unreadable
            raise deadline.timed_out() from None
        return None
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def _repository_dir(repo_path: str) -> str:
    if not isinstance(repo_path, str) or not repo_path or "\0" in repo_path:
        raise _unreadable()
    repo_dir = os.path.realpath(repo_path)
    if not os.path.isdir(repo_dir):
        raise _unreadable()
    result = _run_git(repo_dir, "rev-parse", "--git-dir")
    if result is None or result.returncode != 0:
        raise _unreadable()
    return repo_dir


def _resolve_in(repo_dir: str, revision: str) -> str:
    not_found = _refuse(
        "revision_not_found",
        "The pinned revision was not found in the evidence repository.",
        field=FIELD_REPOSITORY,
        hint="Pin the repository link to a commit, branch or tag that exists.",
    )
    if (
        not isinstance(revision, str)
        or not revision.strip()
        or len(revision) > MAX_REVISION_CHARS
        or any(ord(ch) < 32 or ord(ch) == 127 for ch in revision)
    ):
        raise not_found
    result = _run_git(
        repo_dir, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}"
    )
    if result is None:
        raise _unreadable()
    if result.returncode != 0:
        raise not_found
    commit = result.stdout.decode("ascii", errors="replace").strip()
    if not _FULL_OID.fullmatch(commit):
        raise not_found
    return commit


def resolve_commit(*, repo_path: str, revision: str) -> str:
    """Resolve a revision (full SHA, short SHA, branch, tag, HEAD) to a full commit SHA, or raise
    memory_evidence_invalid (reason revision_not_found / repository_unreadable)."""
    return _resolve_in(_repository_dir(repo_path), revision)


def normalise_path(path: str) -> str:
    """A repository-relative path with `.` segments and repeated or trailing slashes removed;
    refuses anything that could name a file outside the tree or pass for a git option."""

    def invalid(message: str) -> MemoryPortalError:
        return _refuse(
            "path_invalid",
            message,
            field=FIELD_PATH,
            hint="Give a path relative to the repository root, such as src/app.py.",
        )

    if not isinstance(path, str) or not path:
        raise invalid("The evidence path is empty.")
    if "\0" in path or any(ord(ch) < 32 or ord(ch) == 127 for ch in path):
        raise invalid("The evidence path contains control characters.")
    if path.startswith("/"):
        raise invalid("The evidence path must be relative to the repository root.")
    segments = [segment for segment in path.split("/") if segment not in ("", ".")]
    if ".." in segments:
        raise invalid("The evidence path must not contain '..' segments.")
    normalised = "/".join(segments)
    if not normalised:
        raise invalid("The evidence path does not name a file.")
    if normalised.startswith("-"):
        raise invalid("The evidence path must not start with '-'.")
    if len(normalised) > MAX_PATH_CHARS:
        raise invalid(f"The evidence path is longer than {MAX_PATH_CHARS} characters.")
    return normalised


def _check_quote(quote: str | None) -> str:
    if quote is None or quote == "":
        return ""
    if not isinstance(quote, str) or not QUOTE_MIN <= len(quote) <= QUOTE_MAX:
        raise _refuse(
            "quote_length",
            f"The evidence quote must be {QUOTE_MIN} to {QUOTE_MAX} characters long.",
            field=FIELD_QUOTE,
            hint="Quote a distinctive line or two from the file, or leave the quote out.",
        )
    return quote


def _read_regular_file(repo_dir: str, commit: str, path: str) -> str:
    """The file's text at commit, after checking it is a regular file within the size limit."""
    listing = _run_git(repo_dir, "ls-tree", "--full-tree", "-z", commit, "--", path)
    if listing is None or listing.returncode != 0:
        raise _unreadable()
    entry = None
    for record in listing.stdout.split(b"\0"):
        meta, tab, name = record.partition(b"\t")
        if tab and name.decode("utf-8", errors="surrogateescape") == path:
            entry = meta.decode("ascii", errors="replace").split(" ")
            break
    if entry is None or len(entry) != 3:
        raise _refuse(
            "path_not_found",
            f"The evidence path '{path}' does not exist at the pinned revision.",
            field=FIELD_PATH,
            hint="Cite a file that exists at the repository link's pinned revision.",
        )
    mode, object_type, blob = entry
    if mode not in REGULAR_FILE_MODES or object_type != "blob":
        kind = {"120000": "a symlink", "160000": "a submodule", "040000": "a directory"}.get(
            mode, "not a regular file"
        )
        raise _refuse(
            "not_a_regular_file",
            f"The evidence path '{path}' is {kind}, not a regular file.",
            field=FIELD_PATH,
            hint="Cite a regular file, not a directory, symlink or submodule.",
        )
    if not _FULL_OID.fullmatch(blob):
        raise _unreadable()

    size_result = _run_git(repo_dir, "cat-file", "-s", blob)
    if size_result is None or size_result.returncode != 0:
        raise _unreadable()
    try:
        size = int(size_result.stdout.strip())
    except ValueError:
        raise _unreadable() from None
    if size > MAX_FILE_BYTES:
        raise _refuse(
            "file_too_large",
            f"The evidence file '{path}' is {size} bytes; the limit is {MAX_FILE_BYTES}.",
            field=FIELD_PATH,
            hint=f"Cite a smaller file (at most {MAX_FILE_BYTES} bytes).",
        )

    content = _run_git(repo_dir, "cat-file", "blob", blob)
    if content is None or content.returncode != 0:
        raise _unreadable()
    return content.stdout.decode("utf-8", errors="replace")


def verify_evidence(
    *, repo_path: str, revision: str, path: str, quote: str | None
) -> VerifiedEvidence:
    """Check the rules above at `revision` and return what to record."""
    # Input-only checks come first: a malformed path or quote is refused without running git.
    normalised = normalise_path(path)
    checked_quote = _check_quote(quote)
    repo_dir = _repository_dir(repo_path)
    commit = _resolve_in(repo_dir, revision)
    text = _read_regular_file(repo_dir, commit, normalised)
    if checked_quote and checked_quote not in text:
        raise _refuse(
            "quote_not_found",
            f"The evidence quote does not occur in '{normalised}' at the pinned revision.",
            field=FIELD_QUOTE,
            hint="Copy the quote exactly from the file, including whitespace and case.",
        )
    return VerifiedEvidence(commit=commit, path=normalised, quote=checked_quote)


def quote_matches(*, repo_path: str, commit: str, path: str, quote: str) -> bool:
    """True when the quote still occurs exactly in that file at that commit (used to re-verify a
    stale note at a new revision); False for any missing file/other failure."""
    try:
        verify_evidence(repo_path=repo_path, revision=commit, path=path, quote=quote)
    except MemoryPortalError:
        return False
    return True
