"""`memory`: an agent's (or a person's) memory from the shell, over the JSON API.

    memory save "<fact>" [--expires DATE] [--supersedes mem_…] [--agent agt_…]
    memory day "<line>"
    memory list [--kind fact|day] [--status active|archived] [--agent agt_…] [--all]
    memory archive mem_… --reason TEXT
    memory unarchive mem_…
    memory recall [--query TEXT] [--agent agt_…] [--start]
    memory mcp       (stdio MCP forwarding to the portal's /mcp; a run token or an agent key)

MEMORY_PORTAL_URL and MEMORY_PORTAL_TOKEN say where and who. Output is a readable table;
`--json` prints the API's JSON. An API error prints `code: message (hint)` and exits 1.
Standard library only, so it runs wherever Python does — except `memory mcp`, which needs the
`mcp` package (memory_portal/cli_mcp.py)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from datetime import date, datetime

TIMEOUT_SECONDS = 30
EXIT_API_ERROR = 1
EXIT_USAGE = 2


class CliError(Exception):
    def __init__(self, code: str, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.code, self.message, self.hint = code, message, hint

    def __str__(self) -> str:
        return f"{self.code}: {self.message}" + (f" ({self.hint})" if self.hint else "")


class Client:
    def __init__(self, base_url: str, token: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token

    def call(self, method: str, path: str, body: dict | None = None, query: dict | None = None):
        url = self.base_url + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise _api_error(exc) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            reason = getattr(exc, "reason", exc)
            raise CliError(
                "connection_failed",
                f"Could not reach {self.base_url}: {reason}.",
                "Check MEMORY_PORTAL_URL and that the server is running.",
            ) from None
        return json.loads(raw) if raw else None


def _api_error(exc: urllib.error.HTTPError) -> CliError:
    try:
        error = json.loads(exc.read() or b"{}")["error"]
        return CliError(error["code"], error["message"], error.get("hint", ""))
    except (ValueError, KeyError, TypeError):
        return CliError(f"http_{exc.code}", f"The server answered {exc.code} {exc.reason}.")


# --- Output ---------------------------------------------------------------------------------


def _short(text: str, width: int = 60) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= width else one_line[: width - 1] + "…"


def _date(value: str | None) -> str:
    return value[:10] if value else "-"


def table(rows: list[list[str]], headers: list[str]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=False)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def show_memory(memory: dict) -> str:
    fields = [
        ("id", memory["id"]),
        ("agent", memory["agentId"]),
        ("kind", memory["kind"] + (f" {memory['day']}" if memory.get("day") else "")),
        (
            "status",
            memory["status"]
            + (f" ({memory['archiveReason']})" if memory.get("archiveReason") else ""),
        ),
        (
            "expires",
            _date(memory.get("expiresAt")) + (" (expired)" if memory.get("expired") else ""),
        ),
        ("recalls", str(memory["recallCount"])),
        ("text", memory["text"]),
    ]
    return "\n".join(f"{name:>8}  {value}" for name, value in fields)


def show_list(data: list[dict]) -> str:
    if not data:
        return "No memories."
    rows = [
        [
            m["id"],
            m["kind"] if m["kind"] != "day" else f"day {m['day']}",
            m["status"],
            str(m["recallCount"]),
            _date(m["createdAt"]),
            _date(m.get("expiresAt")) + ("!" if m.get("expired") else ""),
            _short(m["text"]),
        ]
        for m in data
    ]
    return table(rows, ["ID", "KIND", "STATUS", "RECALLS", "ADDED", "EXPIRES", "TEXT"])


def _recalled(memories: list[dict]) -> str:
    rows = [
        [
            "-" if m["score"] is None else f"{m['score']:.2f}",
            m["id"],
            _date(m["createdAt"]),
            _short(m["text"], 70),
        ]
        for m in memories
    ]
    return table(rows, ["SCORE", "ID", "ADDED", "TEXT"])


def show_recall(body: dict) -> str:
    if body.get("skipped"):
        if body.get("skipReason") == "slash_command":
            return "Skipped: a slash command gets no start recall."
        return "Skipped: this run already recalled at its start in the last 24 hours."
    lines = []
    if body.get("fallback") in ("embeddings_endpoint", "embeddings_warming", "lexical_only"):
        lines.append(f"(scored by a stand-in: {body['fallback']})")
    elif body.get("fallback"):
        lines.append(f"(scoring unavailable: {body['fallback']}; newest facts listed)")
    if body["memories"]:
        lines.append(_recalled(body["memories"]))
    else:
        lines.append("No memory scored high enough.")
    if body.get("related"):
        lines.append("")
        lines.append("Possibly related (lower confidence):")
        lines.append(_recalled(body["related"]))
    if body.get("dayLog"):
        lines.append("")
        lines.append("Day log (newest first):")
        lines.extend(f"  {line}" for line in body["dayLog"])
    return "\n".join(lines)


# --- Commands -------------------------------------------------------------------------------


def _expiry(value: str) -> str:
    """A date (end of that UTC day is not implied: midnight UTC) or a full ISO time."""
    try:
        return datetime.combine(date.fromisoformat(value), datetime.min.time()).isoformat() + "Z"
    except ValueError:
        pass
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a date or ISO time: {value!r}") from exc
    return value


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="memory",
        description="Agent memory from the shell (Memory Portal API).",
        epilog="Set MEMORY_PORTAL_URL and MEMORY_PORTAL_TOKEN.",
    )
    root.add_argument("--json", action="store_true", help="print the API's JSON")
    # --json after the command too (`memory list --json`): each command takes it, and leaves
    # the root's value alone when it is not given there.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print the API's JSON"
    )
    sub = root.add_subparsers(dest="command", required=True)

    def command(name: str, **kwargs) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[common], **kwargs)

    save = command("save", help="save one fact")
    save.add_argument("text")
    save.add_argument("--expires", type=_expiry, help="expiry date (YYYY-MM-DD) or ISO time")
    save.add_argument("--supersedes", help="archive this mem_ id as superseded")
    save.add_argument("--agent", help="the agent (people only)")

    day = command("day", help="append a line to today's day log (agents only)")
    day.add_argument("line")

    listing = command("list", help="list memories, newest first")
    listing.add_argument("--kind", choices=["fact", "day"])
    listing.add_argument("--status", choices=["active", "archived"])
    listing.add_argument("--agent")
    listing.add_argument("--all", action="store_true", help="include archived memories")
    listing.add_argument("--limit", type=int, default=100)

    archive = command("archive", help="archive a memory")
    archive.add_argument("id")
    archive.add_argument("--reason", required=True)

    unarchive = command("unarchive", help="bring an archived memory back")
    unarchive.add_argument("id")

    command(
        "mcp", help="serve the memory tools over MCP on stdin/stdout (a run token or an agent key)"
    )

    recall = command("recall", help="show what a recall picks, with scores")
    recall.add_argument("--query", help="what to recall for (the current task)")
    recall.add_argument("--agent", help="the agent (people only)")
    recall.add_argument("--start", action="store_true", help="a start-of-run recall")
    return root


def run(args: argparse.Namespace, client: Client) -> tuple[object, str]:
    """Call the API for one command; returns (JSON body, human text)."""
    if args.command == "save":
        body = {"text": args.text}
        for key, value in (
            ("expiresAt", args.expires),
            ("supersedes", args.supersedes),
            ("agentId", args.agent),
        ):
            if value:
                body[key] = value
        memory = client.call("POST", "/api/v1/memories", body)
        return memory, f"Saved {memory['id']}.\n" + show_memory(memory)
    if args.command == "day":
        memory = client.call("POST", "/api/v1/memories/day", {"line": args.line})
        return memory, f"Appended to {memory['id']} ({memory['day']})."
    if args.command == "list":
        status = "all" if args.all else (args.status or "active")
        body = client.call(
            "GET",
            "/api/v1/memories",
            query={"kind": args.kind, "status": status, "agentId": args.agent, "limit": args.limit},
        )
        return body, show_list(body["data"])
    if args.command == "archive":
        memory = client.call("POST", f"/api/v1/memories/{args.id}/archive", {"reason": args.reason})
        return memory, f"Archived {memory['id']}: {memory['archiveReason']}."
    if args.command == "unarchive":
        memory = client.call("POST", f"/api/v1/memories/{args.id}/unarchive", {})
        return memory, f"Unarchived {memory['id']}."
    body = {"start": args.start}
    if args.query:
        body["query"] = args.query
    if args.agent:
        body["agentId"] = args.agent
    result = client.call("POST", "/api/v1/memories/recall", body)
    return result, show_recall(result)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    base_url = os.environ.get("MEMORY_PORTAL_URL", "").strip()
    token = os.environ.get("MEMORY_PORTAL_TOKEN", "").strip()
    if not base_url or not token:
        print(
            "config_missing: set MEMORY_PORTAL_URL and MEMORY_PORTAL_TOKEN "
            "(the server's address and your API token)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.command == "mcp":
        from memory_portal import cli_mcp  # the mcp package, only for this command

        return cli_mcp.main(base_url, token)
    try:
        body, text = run(args, Client(base_url, token))
    except CliError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_API_ERROR
    print(json.dumps(body, indent=2, ensure_ascii=False) if args.json else text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
