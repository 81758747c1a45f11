"""Evidence checks against real git repositories built in a temporary folder."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from memory_portal.memory import evidence
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.evidence import (
    MAX_FILE_BYTES,
    QUOTE_MAX,
    QUOTE_MIN,
    VerifiedEvidence,
    quote_matches,
    resolve_commit,
    verify_evidence,
)

QUOTE = "def handle_request(payload):"
README = f"# Service\n\n{QUOTE}\n    return payload\n"

# The developer's own git config (signing, hooks, default branch) must not change the results.
GIT_ENV = {
    **{key: value for key, value in os.environ.items() if not key.startswith("GIT_")},
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
    "GIT_TERMINAL_PROMPT": "0",
}


def git(repo: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *args],
        cwd=repo,
        env=GIT_ENV,
        capture_output=True,
        check=True,
        timeout=30,
    )
    return result.stdout.decode().strip()


def write_files(repo: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        target = repo / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")


def commit_all(repo: Path, message: str = "commit") -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def make_repo(tmp_path: Path, files: dict[str, str | bytes], name: str = "repo") -> tuple[str, str]:
    """A working repository with `files` committed on branch main; returns (path, commit sha)."""
    repo = tmp_path / name
    repo.mkdir()
    git(repo, "init", "-q")
    write_files(repo, files)
    return str(repo), commit_all(repo, "initial")


def refusal(excinfo: pytest.ExceptionInfo[MemoryPortalError]) -> MemoryPortalError:
    error = excinfo.value
    assert error.code == "memory_evidence_invalid"
    assert error.hint
    return error


def verify(repo: str, revision: str, path: str = "README.md", quote: str | None = QUOTE):
    return verify_evidence(repo_path=repo, revision=revision, path=path, quote=quote)


# --- Revisions ----------------------------------------------------------------------------------


def test_regular_file_at_full_sha(tmp_path):
    repo, sha = make_repo(tmp_path, {"README.md": README})
    assert verify(repo, sha) == VerifiedEvidence(commit=sha, path="README.md", quote=QUOTE)


def test_short_sha_records_full_sha(tmp_path):
    repo, sha = make_repo(tmp_path, {"README.md": README})
    assert verify(repo, sha[:8]).commit == sha


def test_branch_tag_and_head_record_full_sha(tmp_path):
    repo, sha = make_repo(tmp_path, {"README.md": README})
    git(Path(repo), "tag", "-a", "v1", "-m", "release")
    for revision in ("main", "refs/heads/main", "HEAD", "v1"):
        assert verify(repo, revision).commit == sha
        assert resolve_commit(repo_path=repo, revision=revision) == sha
    assert len(sha) == 40


def test_bare_repository(tmp_path):
    source, sha = make_repo(tmp_path, {"docs/guide.md": README})
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", source, str(bare))
    result = verify(str(bare), "main", path="docs/guide.md")
    assert result == VerifiedEvidence(commit=sha, path="docs/guide.md", quote=QUOTE)


def test_pinned_revision_reads_old_content(tmp_path):
    old_quote = "old behaviour: retries three times"
    new_quote = "new behaviour: retries five times"
    repo, old_sha = make_repo(tmp_path, {"app.py": f"# {old_quote}\n"})
    write_files(Path(repo), {"app.py": f"# {new_quote}\n"})
    new_sha = commit_all(Path(repo), "change")

    assert verify(repo, old_sha, path="app.py", quote=old_quote).commit == old_sha
    with pytest.raises(MemoryPortalError) as excinfo:
        verify(repo, old_sha, path="app.py", quote=new_quote)
    assert refusal(excinfo).reason == "quote_not_found"
    assert verify(repo, "main", path="app.py", quote=new_quote).commit == new_sha


def test_unknown_revision(tmp_path):
    repo, _ = make_repo(tmp_path, {"README.md": README})
    for revision in ("no-such-branch", "0" * 40, "", "--all", "-h", "main\nHEAD"):
        with pytest.raises(MemoryPortalError) as excinfo:
            verify(repo, revision)
        error = refusal(excinfo)
        assert error.reason == "revision_not_found", revision
        assert error.field == "evidence.repositoryId"


def test_revision_naming_a_tree_is_not_a_commit(tmp_path):
    repo, sha = make_repo(tmp_path, {"README.md": README})
    tree = git(Path(repo), "rev-parse", f"{sha}^{{tree}}")
    with pytest.raises(MemoryPortalError) as excinfo:
        resolve_commit(repo_path=repo, revision=tree)
    assert refusal(excinfo).reason == "revision_not_found"


# --- Repositories -------------------------------------------------------------------------------


def test_not_a_git_repository(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "README.md").write_text(README)
    for repo in (str(plain), str(tmp_path / "missing"), str(plain / "README.md")):
        with pytest.raises(MemoryPortalError) as excinfo:
            verify(repo, "HEAD")
        error = refusal(excinfo)
        assert error.reason == "repository_unreadable"
        assert error.field == "evidence.repositoryId"


def test_plain_folder_inside_a_repository_is_not_read_as_it(tmp_path):
    repo, _ = make_repo(tmp_path, {"README.md": README, "src/app.py": "x = 1\n"})
    with pytest.raises(MemoryPortalError) as excinfo:
        verify(str(Path(repo) / "src"), "HEAD")
    assert refusal(excinfo).reason == "repository_unreadable"


def test_git_that_cannot_run_is_unreadable(tmp_path, monkeypatch):
    repo, sha = make_repo(tmp_path, {"README.md": README})
    monkeypatch.setattr(evidence, "_git_config", lambda: (str(tmp_path / "no-git"), 10))
    with pytest.raises(MemoryPortalError) as excinfo:
        verify(repo, sha)
    assert refusal(excinfo).reason == "repository_unreadable"


def test_git_timeout_is_unreadable(tmp_path, monkeypatch):
    repo, sha = make_repo(tmp_path, {"README.md": README})
    slow_git = tmp_path / "slow-git"
    slow_git.write_text("#!/bin/sh\nsleep 5 &\nsleep 5\n")
    slow_git.chmod(0o755)
    monkeypatch.setattr(evidence, "_git_config", lambda: (str(slow_git), 0.2))
    started = time.monotonic()
    with pytest.raises(MemoryPortalError) as excinfo:
        verify(repo, sha)
    assert refusal(excinfo).reason == "repository_unreadable"
    assert time.monotonic() - started < 2


def test_git_config_defaults_without_settings():
    binary, timeout = evidence._git_config()
    assert binary
    assert timeout > 0


# --- Paths --------------------------------------------------------------------------------------


def test_path_is_normalised(tmp_path):
    repo, sha = make_repo(tmp_path, {"src/pkg/app.py": README})
    for path in ("src/pkg/app.py", "./src/pkg/app.py", "src//pkg/./app.py"):
        assert verify(repo, sha, path=path).path == "src/pkg/app.py"


def test_unusual_file_names(tmp_path):
    name = "docs/naïve file (v2).md"
    repo, sha = make_repo(tmp_path, {name: README, "docs/-dash.md": README})
    assert verify(repo, sha, path=name).path == name
    assert verify(repo, sha, path="docs/-dash.md").path == "docs/-dash.md"


def test_pathspec_magic_is_literal(tmp_path):
    repo, sha = make_repo(tmp_path, {"a.md": README, "b.md": README})
    for path in ("*.md", ":(glob)*.md", "?.md"):
        with pytest.raises(MemoryPortalError) as excinfo:
            verify(repo, sha, path=path)
        assert refusal(excinfo).reason == "path_not_found", path


@pytest.mark.parametrize(
    "path",
    [
        "",
        ".",
        "/",
        "./",
        "/etc/passwd",
        "../outside.txt",
        "src/../../outside.txt",
        "src/..",
        "-rf",
        "--output=/tmp/x",
        "./-rf",
        "README.md\0.txt",
        "README.md\n",
        "a/" * 600 + "b",
    ],
)
def test_invalid_paths(tmp_path, path):
    repo, sha = make_repo(tmp_path, {"README.md": README})
    with pytest.raises(MemoryPortalError) as excinfo:
        verify(repo, sha, path=path)
    error = refusal(excinfo)
    assert error.reason == "path_invalid"
    assert error.field == "evidence.path"


def test_missing_path(tmp_path):
    repo, sha = make_repo(tmp_path, {"README.md": README, "src/app.py": "x = 1\n"})
    for path in ("missing.md", "src/missing.py", "README.md/inner", "readme.md", "src/app"):
        with pytest.raises(MemoryPortalError) as excinfo:
            verify(repo, sha, path=path)
        error = refusal(excinfo)
        assert error.reason == "path_not_found", path
        assert error.field == "evidence.path"


def test_path_added_later_is_missing_at_old_revision(tmp_path):
    repo, old_sha = make_repo(tmp_path, {"README.md": README})
    write_files(Path(repo), {"NEW.md": README})
    commit_all(Path(repo), "add")
    with pytest.raises(MemoryPortalError) as excinfo:
        verify(repo, old_sha, path="NEW.md")
    assert refusal(excinfo).reason == "path_not_found"


# --- File kinds and size ------------------------------------------------------------------------


def test_directory_is_not_a_regular_file(tmp_path):
    repo, sha = make_repo(tmp_path, {"src/app.py": README})
    for path in ("src", "src/"):
        with pytest.raises(MemoryPortalError) as excinfo:
            verify(repo, sha, path=path, quote=None)
        error = refusal(excinfo)
        assert error.reason == "not_a_regular_file"
        assert error.field == "evidence.path"


def test_symlink_is_not_a_regular_file(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    write_files(repo, {"README.md": README})
    os.symlink("README.md", repo / "link.md")
    sha = commit_all(repo)
    assert git(repo, "ls-tree", sha, "--", "link.md").startswith("120000 ")
    with pytest.raises(MemoryPortalError) as excinfo:
        verify(str(repo), sha, path="link.md", quote=None)
    assert refusal(excinfo).reason == "not_a_regular_file"


def test_submodule_is_not_a_regular_file(tmp_path):
    other, _ = make_repo(tmp_path, {"README.md": README}, name="other")
    repo, _ = make_repo(tmp_path, {"main.txt": "main\n"})
    git(Path(repo), "-c", "protocol.file.allow=always", "submodule", "add", "-q", other, "sub")
    sha = commit_all(Path(repo), "add submodule")
    assert git(Path(repo), "ls-tree", sha, "--", "sub").startswith("160000 ")
    for path in ("sub", "sub/README.md"):
        with pytest.raises(MemoryPortalError) as excinfo:
            verify(repo, sha, path=path, quote=None)
        expected = "not_a_regular_file" if path == "sub" else "path_not_found"
        assert refusal(excinfo).reason == expected, path


def test_executable_file_is_regular(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    write_files(repo, {"run.sh": f"#!/bin/sh\n# {QUOTE}\n"})
    (repo / "run.sh").chmod(0o755)
    sha = commit_all(repo)
    assert git(repo, "ls-tree", sha, "--", "run.sh").startswith("100755 ")
    assert verify(str(repo), sha, path="run.sh").path == "run.sh"


def test_file_size_limit(tmp_path):
    tail = QUOTE.encode()
    at_limit = b"a" * (MAX_FILE_BYTES - len(tail)) + tail
    repo, sha = make_repo(tmp_path, {"at-limit.txt": at_limit, "over-limit.txt": at_limit + b"b"})
    assert len(at_limit) == 512_000

    assert verify(repo, sha, path="at-limit.txt").path == "at-limit.txt"
    with pytest.raises(MemoryPortalError) as excinfo:
        verify(repo, sha, path="over-limit.txt", quote=None)
    error = refusal(excinfo)
    assert error.reason == "file_too_large"
    assert error.field == "evidence.path"


# --- Quotes -------------------------------------------------------------------------------------


def test_no_quote_is_recorded_as_empty(tmp_path):
    repo, sha = make_repo(tmp_path, {"README.md": README})
    assert verify(repo, sha, quote=None).quote == ""
    assert verify(repo, sha, quote="").quote == ""


def test_quote_length_bounds(tmp_path):
    body = "".join(f"line {n:04d} of the fixture file\n" for n in range(40))
    repo, sha = make_repo(tmp_path, {"notes.txt": body})
    assert len(body) > QUOTE_MAX + 1

    for length in (QUOTE_MIN, QUOTE_MAX):
        assert verify(repo, sha, path="notes.txt", quote=body[:length]).quote == body[:length]
    for length in (QUOTE_MIN - 1, QUOTE_MAX + 1):
        with pytest.raises(MemoryPortalError) as excinfo:
            verify(repo, sha, path="notes.txt", quote=body[:length])
        error = refusal(excinfo)
        assert error.reason == "quote_length", length
        assert error.field == "evidence.quote"


def test_quote_must_match_exactly(tmp_path):
    repo, sha = make_repo(tmp_path, {"README.md": README})
    for quote in (QUOTE.upper(), QUOTE.replace(" ", "  "), "text that is not in the file"):
        with pytest.raises(MemoryPortalError) as excinfo:
            verify(repo, sha, quote=quote)
        error = refusal(excinfo)
        assert error.reason == "quote_not_found"
        assert error.field == "evidence.quote"


def test_quote_spanning_lines_and_unicode(tmp_path):
    text = "première ligne — café\nsecond line ✓ done\n"
    repo, sha = make_repo(tmp_path, {"fr.txt": text})
    quote = "café\nsecond line ✓"
    assert verify(repo, sha, path="fr.txt", quote=quote).quote == quote


def test_invalid_utf8_file_still_matches_readable_text(tmp_path):
    repo, sha = make_repo(tmp_path, {"mixed.bin": b"\xff\xfe header \x00\x01 " + QUOTE.encode()})
    assert verify(repo, sha, path="mixed.bin").quote == QUOTE


def test_messages_never_contain_the_quote(tmp_path):
    secret_quote = "zz-marker-7f3q-zz"
    repo, sha = make_repo(tmp_path, {"README.md": README, "src/app.py": "x\n"})
    cases = [
        dict(revision=sha, path="README.md", quote=secret_quote),
        dict(revision=sha, path="README.md", quote=secret_quote * 30),
        dict(revision=sha, path="missing.md", quote=secret_quote),
        dict(revision=sha, path="src", quote=secret_quote),
        dict(revision="nope", path="README.md", quote=secret_quote),
    ]
    reasons = set()
    for case in cases:
        with pytest.raises(MemoryPortalError) as excinfo:
            verify_evidence(repo_path=repo, **case)
        error = refusal(excinfo)
        reasons.add(error.reason)
        for text in (error.message, error.hint, str(error), repr(error), str(error.as_dict())):
            assert "marker-7f3q" not in text
            assert "return payload" not in text
    assert reasons == {
        "quote_not_found",
        "quote_length",
        "path_not_found",
        "not_a_regular_file",
        "revision_not_found",
    }


# --- quote_matches ------------------------------------------------------------------------------


def test_quote_matches(tmp_path):
    repo, old_sha = make_repo(tmp_path, {"README.md": README, "other.md": "other\n"})
    write_files(Path(repo), {"README.md": "# Service\n\nrewritten entirely\n"})
    git(Path(repo), "rm", "-q", "other.md")
    new_sha = commit_all(Path(repo), "rewrite")

    def matches(**overrides):
        args = dict(repo_path=repo, commit=new_sha, path="README.md", quote=QUOTE)
        return quote_matches(**(args | overrides))

    assert matches(commit=old_sha)
    assert matches(commit=new_sha, quote="rewritten entirely")
    assert not matches()
    assert not matches(path="other.md", quote="other", commit=old_sha)  # too short a quote
    assert not matches(path="other.md")
    assert not matches(commit="0" * 40)
    assert not matches(path="../README.md")
    assert not matches(repo_path=str(tmp_path / "missing"))
