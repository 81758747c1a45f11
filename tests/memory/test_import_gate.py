"""Import validates like the live API, then checks the file against itself (SPEC §2.9, §3.5):
every text field of every line of the format is gated (enumerated from the format's models,
so a new field is covered or this fails), hostile files are a clean refusal naming the line and
the field, never a 500 or a partial write, and a project that imported anything can still be
read, exported and deleted."""

from __future__ import annotations

import json
import os
import typing

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from memory_portal.memory import services
from memory_portal.memory.actors import Actor
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.models import Note, Project
from memory_portal.memory.portability import ImportInvalid, project_export, project_import
from memory_portal.memory.portability import format as fmt
from memory_portal.memory.selectors import notes_table

from .test_portability import export, filled  # noqa: F401 - the fixture

# A token shape every scanner knows (GitHub's), in a field's own case: tags are lower-cased
# after the scan, so the gate must see them as sent.
SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
EVIDENCE = {"repository": "legacy-main", "path": "src/app.py", "commit": "a" * 40, "quote": "q"}


def _text_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every free-text field of a line model, nested models, lists and dicts included, as a
    dotted path (`provenance.taskKey`, `tags[0]`, `details.reason`)."""
    paths = []
    for name, info in model.model_fields.items():
        if name == "type":
            continue
        for arg in (info.annotation, *typing.get_args(info.annotation)):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                paths += _text_paths(arg, f"{prefix}{name}.")
                break
            if arg is str:
                paths.append(f"{prefix}{name}")
                break
            origin = typing.get_origin(arg)
            if origin is list and str in typing.get_args(arg):
                paths.append(f"{prefix}{name}[0]")
                break
            if origin is dict or arg is dict:
                paths.append(f"{prefix}{name}.reason")
                break
    return paths


LINE_MODELS = list(typing.get_args(typing.get_args(fmt.AnyLine)[0]))
TEXT_FIELDS = [(m, path) for m in LINE_MODELS for path in _text_paths(m)]


def _set(record: dict, path: str, value) -> None:
    head, _, rest = path.partition(".")
    if head.endswith("[0]"):
        record[head[:-3]] = [value, *record[head[:-3]][1:]]
        return
    if rest:
        if record.get(head) is None:
            record[head] = dict(EVIDENCE) if head == "evidence" else {}
        _set(record[head], rest, value)
    else:
        record[head] = value


def _mutated(lines: list[str], line_type: str, change) -> tuple[list[str], int]:
    """The export with the first line of `line_type` changed by `change(record)`; and that
    line's number."""
    at = next(i for i, line in enumerate(lines) if json.loads(line)["type"] == line_type)
    record = json.loads(lines[at])
    change(record)
    out = [*lines]
    out[at] = json.dumps(record) + "\n"
    return out, at + 1


def _refused(lines: list[str]) -> list[tuple[int, str]]:
    before = Note.objects.count()
    with pytest.raises(ImportInvalid) as info:
        project_import(actor=None, lines=lines, project_slug="hostile-copy")
    assert Note.objects.count() == before
    assert not Project.objects.filter(slug="hostile-copy").exists(), "nothing half written"
    return info.value.errors


def test_the_enumeration_sees_every_line_type_and_the_known_text_fields():
    paths = {f"{fmt.line_type(m)}:{p}" for m, p in TEXT_FIELDS}
    for expected in (
        "note:content", "note:summary", "note:tags[0]", "note:evidence.quote",
        "note:evidence.path", "note:provenance.taskKey", "note:provenance.step", "note:vetoedBy",
        "note:provenance.createdByAgentId", "agent:name", "application:name", "project:name",
        "event:actor", "event:details.reason", "recovery:forgottenByUser",
    ):  # fmt: skip
        assert expected in paths


@pytest.mark.parametrize(
    ("model", "path"), TEXT_FIELDS, ids=[f"{fmt.line_type(m)}:{p}" for m, p in TEXT_FIELDS]
)
def test_every_text_field_of_the_format_is_gated(filled, model, path):  # noqa: F811
    lines = export(filled.project)
    kind = fmt.line_type(model)
    assert any(json.loads(line)["type"] == kind for line in lines), f"no {kind} line exported"
    bad, number = _mutated(lines, kind, lambda record: _set(record, path, SECRET))
    field = path.split(".")[-1].removesuffix("[0]")
    errors = _refused(bad)
    assert any(n == number and field in message for n, message in errors), errors


HOSTILE = {
    "a time past the calendar in UTC": ("note", lambda r: r.update(
        createdAt="9999-12-31T23:59:59-14:00")),
    "a time before the calendar in UTC": ("note", lambda r: r.update(
        expiresAt="0001-01-01T00:00:00+14:00")),
    "NUL in content": ("note", lambda r: r.update(content="Retry\x00 once.")),
    "NUL in a name": ("agent", lambda r: r.update(name="Fault\x00writer")),
    "NUL in a credited user": ("note", lambda r: r.update(vetoedBy="\x00")),
    "a tag over its length": ("note", lambda r: r.update(tags=["t" * 40])),
    "a tag the API refuses": ("note", lambda r: r.update(tags=["has space"])),
    "an integer out of range": ("note", lambda r: r.update(recallCount=2**40)),
    "an epoch out of range": ("setting", lambda r: r.update(revocationEpoch=2**35)),
    "a note superseding itself": ("note", lambda r: r.update(supersedesId=r["id"])),
}  # fmt: skip


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_value_is_refused_naming_its_line(filled, case):  # noqa: F811
    kind, change = HOSTILE[case]
    bad, number = _mutated(export(filled.project), kind, change)
    errors = _refused(bad)
    assert any(n == number for n, _ in errors), errors


def _notes(lines: list[str]) -> list[tuple[int, dict]]:
    return [(i, json.loads(line)) for i, line in enumerate(lines) if '"type": "note"' in line
            or '"type":"note"' in line]  # fmt: skip


def _with_copy(lines: list[str], at: int, **changes) -> list[str]:
    """`lines` with a copy of line `at` (changed) inserted after it, the end line's counts kept
    true."""
    record = {**json.loads(lines[at]), **changes}
    out = [*lines[: at + 1], json.dumps(record) + "\n", *lines[at + 1 :]]
    end = json.loads(out[-1])
    end["counts"][record["type"]] += 1
    out[-1] = json.dumps(end) + "\n"
    return out


def test_the_file_is_checked_against_itself(filled):  # noqa: F811
    lines = export(filled.project)
    notes = _notes(lines)
    at, live = next((i, r) for i, r in notes if r["status"] == "active" and r["kind"] != "day")
    # The same note id twice.
    assert any("appears 2 times" in m for _, m in _refused(_with_copy(lines, at)))
    # The same live note twice under two ids.
    twin = _with_copy(lines, at, id="mem_" + "0" * 25 + "1")
    assert any("same live note" in m for _, m in _refused(twin))
    # A vetoed note and a live case-variant of it in the same file.
    vetoed = _with_copy(
        lines, at, id="mem_" + "0" * 25 + "2", content=live["content"].upper(),
        status="archived", archiveReason="vetoed", archivedAt=live["createdAt"],
    )  # fmt: skip
    assert any("live again" in m for _, m in _refused(vetoed))
    # Two recoveries for one note.
    rec_at = next(i for i, line in enumerate(lines) if '"type": "recovery"' in line
                  or '"type":"recovery"' in line)  # fmt: skip
    two = _with_copy(lines, rec_at, id="rec_" + "0" * 25 + "3")
    assert any("2 recoveries" in m for _, m in _refused(two))


def test_the_api_answers_400_for_a_hostile_file(filled, client, make_user):  # noqa: F811
    token = services.token_create(actor=None, user=make_user("root", superuser=True))[1]
    for case in ("a time past the calendar in UTC", "NUL in content", "a tag over its length"):
        kind, change = HOSTILE[case]
        bad, number = _mutated(export(filled.project), kind, change)
        answer = client.post(
            "/api/admin/import?project=hostile-copy", data="".join(bad),
            content_type="application/x-ndjson", HTTP_AUTHORIZATION=f"Bearer {token}",
        )  # fmt: skip
        assert answer.status_code == 400, (case, answer.content[:300])
        error = answer.json()["error"]
        assert error["code"] == "memory_invalid"
        assert number in [line["line"] for line in error["lines"]]
    assert not Project.objects.filter(slug="hostile-copy").exists()


HOSTILE_VALUES = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(max_size=60),
    st.sampled_from(["\x00", "\ud800", SECRET, "9999-12-31T23:59:59-14:00", "x" * 9000, ""]),
    st.none(),
    st.booleans(),
    st.lists(st.text(max_size=40), max_size=10),
)


@pytest.fixture
def hostile_base(filled, make_user):  # noqa: F811
    return export(filled.project), Actor.person(make_user("root", superuser=True))


@settings(
    max_examples=int(os.environ.get("IMPORT_EXAMPLES", "30")),  # more for a longer hunt
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_any_hostile_file_is_refused_or_leaves_a_working_project(hostile_base, data):
    """Hypothesis changes one field of one line to a hostile value: the import refuses it (a
    4xx error), or the project it made can be listed, exported to its end line and deleted.
    Each example runs in a savepoint rolled back after it, so every one starts alike."""
    lines, admin = hostile_base
    at = data.draw(st.integers(min_value=1, max_value=len(lines) - 2), label="line")
    record = json.loads(lines[at])
    name = data.draw(st.sampled_from(sorted(k for k in record if k != "type")), label="field")
    record[name] = data.draw(HOSTILE_VALUES, label="value")
    bad = [*lines]
    bad[at] = json.dumps(record) + "\n"
    with transaction.atomic():
        _import_or_refuse(bad, admin)
        transaction.set_rollback(True)


def _import_or_refuse(lines: list[str], admin: Actor) -> None:
    try:
        report = project_import(
            actor=None, lines=lines, project_slug="hostile-copy", grant_members=True
        )
    except ImportInvalid:
        assert not Project.objects.filter(slug="hostile-copy").exists()
        return
    except MemoryPortalError as err:
        assert err.status < 500
        return
    project = Project.objects.get(slug=report.project)
    assert len(notes_table(actor=admin, project=project)[:50]) >= 0
    out = list(project_export(actor=None, project=project))
    assert json.loads(out[-1])["type"] == "end"
    services.project_delete(actor=None, project=project, confirm=project.slug)
    assert not Project.objects.filter(slug=report.project).exists()


# --- People credited in a file are the project's -----------------------------------------------


def test_an_export_lists_the_members_and_a_restore_brings_them_back(filled):  # noqa: F811
    from memory_portal.memory.models import Membership

    lines = export(filled.project)
    members = [json.loads(line) for line in lines if json.loads(line)["type"] == "member"]
    assert {(m["username"], m["role"]) for m in members} == {
        (filled.manager.username, "manager"), (filled.member.username, "member")
    }
    services.project_delete(actor=None, project=filled.project, confirm="acme-web")
    report = project_import(actor=None, lines=lines, grant_members=True)  # credits the manager
    assert report.counts["member"] == 2
    assert set(Membership.objects.filter(project__slug="acme-web").values_list(
        "user__username", "role")) == {(filled.manager.username, "manager"),
                                       (filled.member.username, "member")}  # fmt: skip


def test_a_credit_to_someone_who_is_not_a_member_is_refused(filled, make_user):  # noqa: F811
    make_user("stranger")  # exists here, but has nothing to do with the project
    bad, number = _mutated(
        export(filled.project), "recovery", lambda r: r.update(forgottenByUser="stranger")
    )
    errors = _refused(bad)
    assert any(n == number and "forgottenByUser: stranger is not a member" in m
               for n, m in errors), errors  # fmt: skip


def test_an_export_without_member_lines_names_the_credits_it_cannot_keep(filled):  # noqa: F811
    """An export made before member lines existed, into a new project: the people it credits
    are nobody's members there, and each such line is named."""
    lines = [line for line in export(filled.project) if json.loads(line)["type"] != "member"]
    end = json.loads(lines[-1])
    end["counts"].pop("member")
    lines[-1] = json.dumps(end) + "\n"
    errors = _refused(lines)
    assert errors and all("is not a member of project hostile-copy" in m for _, m in errors)
    # Into the project the file came from, where those people are members, it imports.
    report = project_import(actor=None, lines=lines)
    assert sum(report.counts.values()) == 0


def test_a_number_too_long_to_read_is_a_bad_line_not_a_crash():
    with pytest.raises(ImportInvalid) as refused:
        project_import(actor=None, lines=['{"type": "header"}\n', "9" * 5000 + "\n"])
    assert (2, "a number too long to read") in refused.value.errors


def test_an_events_recovery_id_is_an_id_or_nothing(filled):  # noqa: F811
    """A recovery id that is no `rec_` id was remapped into one longer than the column (a
    DataError on PostgreSQL, found by the hypothesis test above): it is a bad line now."""
    lines = export(filled.project)
    bad, at = _mutated(lines, "event", lambda r: r.update(recoveryId="00000000000000"))
    errors = _refused(bad)
    assert at in [line for line, _ in errors], errors
