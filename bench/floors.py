"""The raw-SQL floor of each page and endpoint `memory_bench_scale` measures: the statements
the page cannot do without (the rows it shows, found by their indexes, and what it counts),
sent on a plain cursor. Each takes the cursor and the benchmark's parameters (project, agent,
audit cursor…) and fetches everything it selects."""

from __future__ import annotations

NOTE_ROW_JOIN = (
    "SELECT e.*, r.status, a.name, rec.id FROM project_memory_entry e"
    " LEFT JOIN memory_run r ON r.id = e.origin_run_id"
    " LEFT JOIN memory_agent a ON a.id = r.agent_id"
    " LEFT JOIN project_memory_recovery rec ON rec.note_id = e.id"
    " WHERE e.id = ANY(%s)"
)
AUDIT_PAGE = "SELECT * FROM memory_auditevent {where} ORDER BY created_at DESC, id DESC LIMIT 51"


def _all(cursor, sql: str, params=()) -> list:
    cursor.execute(sql, params)
    return cursor.fetchall()


def projects(cursor, p):
    return _all(
        cursor,
        "SELECT p.slug, p.name, s.enabled FROM memory_project p"
        " JOIN project_memory_setting s ON s.project_id = p.id ORDER BY p.slug",
    )


def audit_first(cursor, p):
    return _all(cursor, AUDIT_PAGE.format(where=""))


def audit_deep(cursor, p):
    at, pk = p["deep"]
    where = "WHERE (created_at, id) < (%s, %s)"
    return _all(cursor, AUDIT_PAGE.format(where=where), [at, pk])


def audit_project(cursor, p):
    return _all(cursor, AUDIT_PAGE.format(where="WHERE project_id = %s"), [p["project"].pk])


def audit_actor(cursor, p):
    return _all(cursor, AUDIT_PAGE.format(where="WHERE actor_label = %s"), [p["actor"]])


def audit_date(cursor, p):
    return _all(cursor, AUDIT_PAGE.format(where="WHERE created_at >= %s"), [p["since"]])


def runs(cursor, p):
    rows = _all(
        cursor,
        "SELECT r.*, a.name FROM memory_run r JOIN memory_agent a ON a.id = r.agent_id"
        " WHERE r.project_id = %s ORDER BY r.started_at DESC, r.id DESC LIMIT 50",
        [p["project"].pk],
    )
    ids = [row[0] for row in rows]
    return _all(
        cursor,
        "SELECT origin_run_id, count(*) FROM project_memory_entry"
        " WHERE origin_run_id = ANY(%s) GROUP BY 1",
        [ids],
    )


def notes_page(cursor, p):
    project_id = p["project"].pk
    _all(cursor, "SELECT count(*) FROM project_memory_entry WHERE project_id = %s", [project_id])
    ids = [
        row[0]
        for row in _all(
            cursor,
            "SELECT id FROM project_memory_entry WHERE project_id = %s"
            " ORDER BY created_at DESC, id DESC LIMIT 50",
            [project_id],
        )
    ]
    return _all(cursor, NOTE_ROW_JOIN, [ids])


def review(cursor, p):
    """One of the queue's four sections: its count, its 25 ids, their rows."""
    where = "WHERE project_id = %s AND status = 'active' AND trust = 'learned' AND kind <> 'day'"
    project_id = p["project"].pk
    _all(cursor, f"SELECT count(*) FROM project_memory_entry {where}", [project_id])
    ids = [
        row[0]
        for row in _all(
            cursor,
            f"SELECT id FROM project_memory_entry {where} ORDER BY created_at, id LIMIT 25",
            [project_id],
        )
    ]
    return _all(cursor, NOTE_ROW_JOIN, [ids])


def overview(cursor, p):
    """The overview's six reads: the last 30 days by day, writer and trust; the backlog by
    age; the recalls per day; the most recalled notes; vetoes and rejects per agent; the
    agents' names."""
    project_id, since = p["project"].pk, p["since"]
    _all(
        cursor,
        "SELECT created_at::date, created_by_agent_id, trust, count(*) FROM project_memory_entry"
        " WHERE project_id = %s AND created_at >= %s GROUP BY 1, 2, 3",
        [project_id, since],
    )
    _all(
        cursor,
        "SELECT count(*) FILTER (WHERE created_at >= %s), count(*) FILTER (WHERE created_at < %s)"
        " FROM project_memory_entry WHERE project_id = %s AND status = 'active'"
        " AND trust = 'learned' AND kind <> 'day' AND (expires_at IS NULL OR expires_at > now())",
        [since, since, project_id],
    )
    _all(
        cursor,
        "SELECT day, recalls FROM memory_recallday WHERE project_id = %s AND day >= %s",
        [project_id, since.date()],
    )
    _all(
        cursor,
        "SELECT id, content, summary, recall_count FROM project_memory_entry"
        " WHERE project_id = %s AND recall_count > 0 AND status <> 'forgotten'"
        " ORDER BY recall_count DESC, last_recalled_at DESC LIMIT 5",
        [project_id],
    )
    _all(
        cursor,
        "SELECT created_by_agent_id,"
        " count(*) FILTER (WHERE status = 'archived' AND archive_reason = 'vetoed'),"
        " count(*) FILTER (WHERE trust = 'rejected') FROM project_memory_entry"
        " WHERE project_id = %s AND created_by_agent_id <> '' GROUP BY 1",
        [project_id],
    )
    return _all(cursor, "SELECT id, name FROM memory_agent WHERE project_id = %s", [project_id])


def search(cursor, p):
    return _all(
        cursor,
        "SELECT id, content, ts_rank(search_vector, q) AS rank"
        " FROM project_memory_entry, websearch_to_tsquery('english', %s) q"
        " WHERE project_id = %s AND status = 'active'"
        " AND coalesce(search_vector, ''::tsvector) @@ q ORDER BY rank DESC LIMIT 6",
        ["cache deploy", p["project"].pk],
    )


def read_list(cursor, p):
    return _all(
        cursor,
        "SELECT * FROM project_memory_entry WHERE project_id = %s AND target = 'long_term'"
        " AND status = 'active' ORDER BY created_at DESC, id DESC LIMIT 6",
        [p["project"].pk],
    )


def recall(cursor, p):
    return _all(
        cursor,
        "SELECT id, content, summary, tags_text, trust, created_at, last_recalled_at,"
        " recall_count FROM project_memory_entry WHERE owner_agent_id = %s AND kind = 'fact'"
        " AND status = 'active'",
        [p["recall_agent"].pk],
    )


FLOORS = {
    f.__name__: f
    for f in (
        projects,
        audit_first,
        audit_deep,
        audit_project,
        audit_actor,
        audit_date,
        runs,
        notes_page,
        review,
        overview,
        search,
        read_list,
        recall,
    )
}
