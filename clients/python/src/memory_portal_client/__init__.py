"""A Python client for Memory Portal's JSON API (README.md beside this package)."""

from .client import AsyncClient, Client, __version__
from .errors import MemoryPortalError
from .models import (
    AgentKey,
    AgentKeyRow,
    DailyDates,
    Entry,
    Evidence,
    Forgotten,
    ImportResult,
    Member,
    Memory,
    NoteState,
    Page,
    ProjectMemory,
    ProjectNote,
    Recall,
    RecalledMemory,
    Recovery,
    RepositoryLink,
    Restored,
    Revert,
    RevertNote,
    RevertUndo,
    Run,
    Scratchpad,
    ScratchpadItem,
    Setting,
    Status,
    ToolDefinition,
    Tools,
    WriteResult,
)

__all__ = [
    "AgentKey", "AgentKeyRow", "AsyncClient", "Client", "DailyDates", "Entry", "Evidence",
    "Forgotten", "ImportResult", "Member", "Memory", "MemoryPortalError", "NoteState", "Page",
    "ProjectMemory", "ProjectNote", "Recall", "RecalledMemory", "Recovery", "RepositoryLink",
    "Restored", "Revert", "RevertNote", "RevertUndo", "Run", "Scratchpad", "ScratchpadItem",
    "Setting", "Status", "ToolDefinition", "Tools", "WriteResult", "__version__",
]  # fmt: skip
