"""`MemoryPortalStore` with the real `langgraph` package against a live server: BaseStore's
operations, a compiled graph whose nodes remember and recall through it, and the product's
rules holding underneath (a vetoed value stays out, a forgotten one comes back by restore)."""

from __future__ import annotations

import json
from typing import TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore, Item
from memory_portal_client import MemoryPortalError
from memory_portal_client.langgraph import MemoryPortalStore

from memory_portal.memory import services
from memory_portal.memory.models import Note, Recovery, Run, Status
from tests.mcp.conftest import run_on_loop

pytestmark = pytest.mark.django_db(transaction=True)

USER = ("users", "u-17", "memories")


@pytest.fixture
def store(live_server, portal_tokens):
    store = MemoryPortalStore(live_server.url, portal_tokens.key)
    yield store
    store.close()


def test_put_get_search_delete_and_list_namespaces(store, world):
    assert isinstance(store, BaseStore)
    store.put(USER, "food", {"likes": "pizza margherita", "dislikes": "olives"})
    store.put(USER, "tone", {"style": "short answers, no small talk"})
    store.put(("users", "u-18", "memories"), "food", {"likes": "ramen"})
    store.put(("teams", "platform"), "oncall", {"rotation": "weekly, handover on Monday"})

    item = store.get(USER, "food")
    assert isinstance(item, Item) and item.value == {"likes": "pizza margherita",
                                                     "dislikes": "olives"}  # fmt: skip
    assert item.namespace == USER and item.key == "food" and item.created_at.tzinfo
    assert store.get(USER, "nothing") is None

    keys = sorted(i.key for i in store.search(("users", "u-17")))
    assert keys == ["food", "tone"]
    assert {i.namespace for i in store.search(("users",))} == {USER, ("users", "u-18", "memories")}
    assert [i.key for i in store.search(("users",), filter={"likes": "ramen"})] == ["food"]
    found = store.search(("users",), query="pizza")
    assert [(i.namespace, i.key) for i in found] == [(USER, "food")]
    assert len(store.search((), limit=2)) == 2 and len(store.search((), offset=3)) == 1

    assert store.list_namespaces() == [
        ("teams", "platform"), ("users", "u-17", "memories"), ("users", "u-18", "memories")
    ]  # fmt: skip
    assert store.list_namespaces(prefix=("users",), max_depth=2) == [
        ("users", "u-17"), ("users", "u-18")
    ]  # fmt: skip
    assert store.list_namespaces(suffix=("platform",)) == [("teams", "platform")]

    store.put(USER, "food", {"likes": "pizza marinara"})  # an update: the old note forgotten
    assert store.get(USER, "food").value == {"likes": "pizza marinara"}
    assert len(store.search(USER)) == 2
    store.delete(USER, "tone")
    assert store.get(USER, "tone") is None

    notes = Note.objects.filter(project=world.project)
    live = notes.filter(status=Status.ACTIVE)
    assert live.count() == 3 and notes.filter(status=Status.FORGOTTEN).count() == 2
    food = live.get(summary="LangGraph · users/u-17/memories · food")
    assert json.loads(food.content) == {
        "namespace": list(USER), "key": "food", "value": {"likes": "pizza marinara"}
    }  # fmt: skip
    assert food.kind == "fact" and food.trust == "learned" and "langgraph" in food.tags
    assert food.created_by_agent_id == world.agent.pk  # the key's agent, in a run of its own
    assert Run.objects.get(pk=food.origin_run_id).task_title == "LangGraph store"


def test_people_keep_the_last_word(store, world):
    store.put(USER, "food", {"likes": "anchovies"})
    note = Note.objects.get(project=world.project, status=Status.ACTIVE)
    services.note_veto(actor=world.as_manager, note_id=note.pk)
    assert store.get(USER, "food") is None  # a vetoed note is never served
    with pytest.raises(MemoryPortalError) as refused:
        store.put(USER, "food", {"likes": "anchovies"})
    assert refused.value.code == "memory_vetoed"

    store.put(USER, "drink", {"likes": "espresso"})
    store.delete(USER, "drink")
    assert Recovery.objects.filter(note__project=world.project).count() == 1
    store.put(USER, "drink", {"likes": "espresso"})  # back by restore, not by a second copy
    assert store.get(USER, "drink").value == {"likes": "espresso"}
    assert Note.objects.filter(project=world.project, summary__endswith="drink").count() == 1


def _origin(key: str) -> Run:
    return Run.objects.get(pk=Note.objects.get(summary__endswith=f"· {key}").origin_run_id)


def test_a_run_token_and_a_spent_run(live_server, portal_tokens, world, settings):
    """With an agent key the store starts a new run when the current one is finished or its
    budget spent, and finishes the runs it started: a spent one, and its last on close."""
    store = MemoryPortalStore(live_server.url, portal_tokens.key)
    store.put(USER, "a", {"n": 1})
    first = _origin("a")
    services.run_update(actor=world.as_manager, run=first, status="failed")
    store.put(USER, "b", {"n": 2})
    second = _origin("b")
    assert second.pk != first.pk and second.status == "running"
    assert Run.objects.get(pk=first.pk).status == "failed"  # a manager's word stays

    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "RUN_CALL_BUDGET": 3}
    for n in range(3):
        store.put(USER, f"c{n}", {"n": n})
    third = _origin("c2")
    assert third.pk != second.pk
    assert Run.objects.get(pk=second.pk).status == "succeeded"
    store.close()
    assert Run.objects.get(pk=third.pk).status == "succeeded"

    pinned = MemoryPortalStore(live_server.url, portal_tokens.run)
    assert pinned.get(USER, "a").value == {"n": 1}
    pinned.close()


class State(TypedDict):
    user: str
    said: str
    answer: str


def _graph(store):
    def remember(state: State, runtime: Runtime) -> dict:
        if state["said"]:
            runtime.store.put(("users", state["user"]), "food", {"likes": state["said"]})
        return {}

    def answer(state: State, runtime: Runtime) -> dict:
        item = runtime.store.get(("users", state["user"]), "food")
        return {"answer": f"You like {item.value['likes']}." if item else "I don't know yet."}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("answer", answer)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "answer")
    builder.add_edge("answer", END)
    return builder.compile(store=store)


def test_a_graph_remembers_across_invocations(store, world):
    graph = _graph(store)
    empty = graph.invoke({"user": "u-17", "said": "", "answer": ""})
    assert empty["answer"] == "I don't know yet."
    graph.invoke({"user": "u-17", "said": "pizza margherita", "answer": ""})
    later = graph.invoke({"user": "u-17", "said": "", "answer": ""})
    assert later["answer"] == "You like pizza margherita."
    note = Note.objects.get(project=world.project, status=Status.ACTIVE)
    assert note.summary == "LangGraph · users/u-17 · food"


def test_the_async_operations(store):
    async def go():
        await store.aput(USER, "food", {"likes": "dumplings"})
        item = await store.aget(USER, "food")
        found = await store.asearch(("users",), query="dumplings")
        spaces = await store.alist_namespaces()
        await store.adelete(USER, "food")
        gone = await store.aget(USER, "food")
        await store.aclose()
        return item, found, spaces, gone

    item, found, spaces, gone = run_on_loop(go())
    assert item.value == {"likes": "dumplings"} and [i.key for i in found] == ["food"]
    assert spaces == [USER] and gone is None
