"""A bounded map kept in one process's memory: the least recently used entry goes first, and
every operation holds a lock, so a worker's threads share it. The caches of the hot path
(query and fact vectors, a status's count and fingerprint, a search's ranking) are made of
it."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping
from datetime import datetime

from django.utils import timezone


class Lru[K: Hashable, V]:
    def __init__(self, size: int) -> None:
        self.size = size
        self._data: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def __contains__(self, key: K) -> bool:
        with self._lock:
            return key in self._data

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def get(self, key: K) -> V | None:
        """The value of `key`, now the most recently used (None: not held)."""
        return self.get_many([key]).get(key)

    def get_many(self, keys: Iterable[K]) -> dict[K, V]:
        """The values held of `keys`, each now among the most recently used."""
        with self._lock:
            found = {k: self._data[k] for k in keys if k in self._data}
            for k in found:
                self._data.move_to_end(k)
        return found

    def put(self, key: K, value: V) -> None:
        self.put_many({key: value})

    def put_many(self, items: Mapping[K, V]) -> None:
        """Keep `items` as the most recently used, dropping the least recent past the size."""
        with self._lock:
            for key, value in items.items():
                self._data[key] = value
                self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)

    def pop(self, key: K) -> None:
        with self._lock:
            self._data.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


def first_expiry(times: Iterable[datetime | None]) -> datetime | None:
    """The `until` of a value read from notes with these expiries: the first of them (None:
    none expires)."""
    return min((at for at in times if at is not None), default=None)


class Kept[K: Hashable, V]:
    """What a read of an agent's view found, kept for the next read that would find the same:
    keyed by everything the read is a function of (`visibility.view_state`: the caller's view
    and the project's switch, epoch and revision as the call's token check read them, and
    whatever the read adds). Every change to what an agent can see advances the revision
    (SPEC §2.2: a write, a review, a veto, a forget, a trust or policy switch, a re-pinned
    repository), and time changes it only as a note expires, so a value is kept until the
    first expiry among the notes it was read from (`until`; None: none expires)."""

    def __init__(self, size: int) -> None:
        self._values: Lru[K, tuple[V, datetime | None]] = Lru(size)

    def get(self, key: K) -> V | None:
        kept = self._values.get(key)
        if kept is None:
            return None
        value, until = kept
        if until is not None and timezone.now() >= until:
            self._values.pop(key)
            return None
        return value

    def put(self, key: K, value: V, until: datetime | None) -> None:
        self._values.put(key, (value, until))

    def clear(self) -> None:
        self._values.clear()
