"""A write transaction against a key-value engine, staged in the client: the writes one
transaction makes, kept in memory until it commits (then sent as one atomic script), and read
back by the same transaction (read-your-writes) while the engine still holds the values from
before it. :class:`~neardup.store.redis.RedisStore` builds on it.

Three kinds of value are staged: strings (``None``: deleted), hash fields (``None``: deleted;
or increments) and sorted-set members (score, or ``None``: removed); a key deleted whole
starts from nothing. :meth:`Staging.commands` turns the lot into engine commands, in an order where
a whole-key delete comes before the writes to the key.

>>> s = Staging()
>>> s.set("a", "1"); s.zadd("z", "7", 7.0); s.hset("h", "f", "x"); s.hincr("h", "n", 2)
>>> s.zrem("z", "8"); [c[0] for c in s.commands()]
['SET', 'HSET', 'HINCRBY', 'ZADD', 'ZREM']
"""

from __future__ import annotations

from collections.abc import Iterator


class Staging:
    """The pending writes of one transaction (see the module)."""

    def __init__(self) -> None:
        self.strings: dict[str, str | None] = {}
        self.fields: dict[str, dict[str, str | None]] = {}
        self.increments: dict[str, dict[str, int]] = {}
        self.members: dict[str, dict[str, float | None]] = {}
        self.added_bounds: dict[str, tuple[float, float]] = {}
        self.rescored: set[str] = set()
        """sorted sets whose added scores' bounds are no longer exact (a member removed, or
        given another score)"""
        self.removed: dict[str, dict[str, float]] = {}
        """the scores the removed members had, where the caller knew them (a read of a range
        then asks the engine for the removals that can lie in it only)"""
        self.dropped: set[str] = set()
        """hashes and sorted sets deleted whole (their server values no longer count)"""
        self.read: dict[str, str | None] = {}
        """string values read from the engine during the transaction (not writes)"""

    def __bool__(self) -> bool:
        return bool(self.strings or self.fields or self.increments or self.members or self.dropped)

    # -- writes ---------------------------------------------------------------------------
    def set(self, key: str, value: str | None) -> None:
        self.strings[key] = value

    def hset(self, key: str, field: str, value: str | None) -> None:
        self.fields.setdefault(key, {})[field] = value
        self.increments.get(key, {}).pop(field, None)

    def hincr(self, key: str, field: str, delta: int) -> None:
        staged = self.fields.get(key, {})
        if field in staged:
            staged[field] = str(int(staged[field] or 0) + delta)
            return
        bucket = self.increments.setdefault(key, {})
        bucket[field] = bucket.get(field, 0) + delta

    def zadd(self, key: str, member: str, score: float) -> None:
        members = self.members.setdefault(key, {})
        score = float(score)
        if members.get(member, score) != score:
            self.rescored.add(key)
        members[member] = score
        lo, hi = self.added_bounds.get(key, (score, score))
        self.added_bounds[key] = (min(lo, score), max(hi, score))
        self.removed.get(key, {}).pop(member, None)

    def added_range(self, key: str) -> tuple[float, float] | None:
        """The lowest and highest score of the members added to ``key``, where that is
        known without a scan (no member removed or given another score since); None when
        nothing was added or it is not known.

        >>> s = Staging(); s.zadd("log", "a", 3); s.zadd("log", "b", 9); s.added_range("log")
        (3.0, 9.0)
        >>> s.zrem("log", "a"); s.added_range("log") is None
        True
        """
        if key in self.rescored or key not in self.added_bounds:
            return None
        return self.added_bounds[key]

    def zrem(self, key: str, member: str, score: float | None = None) -> None:
        """Remove ``member``; ``score``: the score it has in the engine, where known."""
        self.members.setdefault(key, {})[member] = None
        self.rescored.add(key)
        if score is None:
            self.removed.get(key, {}).pop(member, None)
        else:
            self.removed.setdefault(key, {})[member] = float(score)

    def removals_within(self, key: str, lo: float, hi: float) -> int:
        """How many members removed from ``key`` can have a score in ``[lo, hi]`` in the
        engine: those whose score is in it, and those whose score is unknown.

        >>> s = Staging(); s.zrem("z", "a", 1.0); s.zrem("z", "b", 5.0); s.zrem("z", "c")
        >>> s.removals_within("z", 4.0, 9.0)
        2
        """
        known = self.removed.get(key, {})
        return sum(1 for m, v in self.members.get(key, {}).items()
                   if v is None and (m not in known or lo <= known[m] <= hi))

    def drop(self, key: str) -> None:
        """Delete a whole hash or sorted set."""
        self.dropped.add(key)
        self.removed.pop(key, None)
        self.added_bounds.pop(key, None)
        self.rescored.add(key)
        self.fields.pop(key, None)
        self.increments.pop(key, None)
        self.members.pop(key, None)

    # -- what the engine is sent ----------------------------------------------------------
    def commands(self, chunk: int = 500) -> Iterator[tuple[str, str, list[str]]]:
        """(command, key, arguments) in an order that applies the transaction; a command
        carries at most ``chunk`` members or fields."""
        for key in sorted(self.dropped):
            yield "DEL", key, []
        for key, value in self.strings.items():
            if value is None:
                yield "DEL", key, []
            else:
                yield "SET", key, [value]
        for key, fields in self.fields.items():
            live = [(f, v) for f, v in fields.items() if v is not None]
            gone = [f for f, v in fields.items() if v is None]
            for lo in range(0, len(live), chunk):
                yield "HSET", key, [x for f, v in live[lo:lo + chunk] for x in (f, str(v))]
            for lo in range(0, len(gone), chunk):
                yield "HDEL", key, gone[lo:lo + chunk]
        for key, deltas in self.increments.items():
            for field, delta in deltas.items():
                if delta:
                    yield "HINCRBY", key, [field, str(delta)]
        for key, members in self.members.items():
            live_m = [(m, s) for m, s in members.items() if s is not None]
            gone_m = [m for m, s in members.items() if s is None]
            for lo in range(0, len(live_m), chunk):
                yield "ZADD", key, [x for m, s in live_m[lo:lo + chunk] for x in (repr(s), m)]
            for lo in range(0, len(gone_m), chunk):
                yield "ZREM", key, gone_m[lo:lo + chunk]
