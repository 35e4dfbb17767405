"""The plumbing of the Redis store (:mod:`neardup.store.redis`): the connection to one server
or a Redis Cluster, the key prefix with its hash tag, the writers' lease, transactions staged
in the client (:mod:`neardup.store.staging`) and committed by one Lua script, and the reads
that see the open transaction's writes.

A transaction takes the writers' lease (``SET lock NX PX``, renewed while the transaction
runs, so a writer killed with kill -9 holds nobody up for more than :data:`LEASE` seconds),
stages its writes, and commits them with one script that first checks it still holds the
lease: all of a transaction or none of it, never half.

>>> LEASE
10.0
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any
from urllib.parse import parse_qs, urlsplit

from neardup.errors import ConfigError, StoreError, StoreLockedError
from neardup.store.base import redact
from neardup.store.staging import Staging

__all__ = ["LEASE", "REDIS_SCHEMA", "RedisEngine", "as_text"]

#: seconds a writer's lease lasts without renewal (a killed writer blocks others this long at most)
LEASE = 10.0

#: the layout of the keys (meta ``redis_schema``); a store of a newer layout is refused
REDIS_SCHEMA = 1

#: the commit (KEYS: the lease; ARGV: its token, the staged commands as one JSON array of
#: ``[command, key, arguments...]``: one string for the client to send, decoded by the engine's
#: cjson, rather than an argument a value for redis-py to pack one by one); every key carries
#: the store's hash tag, so on a Redis Cluster they all live on the lease's node
_COMMIT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('NEARDUP lease lost')
end
for _, c in ipairs(cjson.decode(ARGV[2])) do
  redis.call(unpack(c))
end
redis.call('DEL', KEYS[1])
return 1
"""

#: what a check reads (Store.lookup), in one round trip: the change log's bounds, the page at
#: the URL and the oldest live page of the digest (KEYS: changes, urls, digest:D; ARGV: url,
#: prefix, whether there is a digest); the page keys share the store's hash tag
_LOOKUP = """
local lo = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local hi = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
local own_id = redis.call('HGET', KEYS[2], ARGV[1])
local own = false
if own_id then own = redis.call('GET', ARGV[2] .. 'page:' .. own_id) end
local same = false
if ARGV[3] == '1' then
  local ids = redis.call('ZRANGE', KEYS[3], 0, 0)
  if ids[1] then
    if ids[1] == own_id then same = own else same = redis.call('GET', ARGV[2] .. 'page:' .. ids[1]) end
  end
end
return {lo[2] or false, hi[2] or false, own, same}
"""

#: the first members of many sorted sets by score, in one call (KEYS: the sets; ARGV: lo, hi,
#: offset, then a count per set, -1 for all): a flat ``[member, score, ...]`` array per set
_FIRSTS = """
local out = {}
for i, key in ipairs(KEYS) do
  out[i] = redis.call('ZRANGEBYSCORE', key, ARGV[1], ARGV[2], 'WITHSCORES', 'LIMIT', ARGV[3], ARGV[3 + i])
end
return out
"""

_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def _score(x: float) -> str:
    """A score bound as the engine reads it (``-inf``, ``+inf`` or the number)."""
    return "-inf" if x == float("-inf") else "+inf" if x == float("inf") else repr(float(x))


def as_text(value: Any) -> str:
    """A reply of the engine as text."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class _Tx(threading.local):
    staging: Staging | None = None
    token: str | None = None
    renewed: float = 0.0
    blocks: dict[str, tuple[int, int, int]] | None = None
    """counter -> (next id, last id, size) of the block of ids this transaction reserved"""
    change_bounds: tuple[int, int] | None = None
    """the change log's first and last positions in the engine, read once a transaction
    ((0, 0): an empty log)"""
    expired_pages: dict[int, Any] | None = None
    """the pages the last read of expired pages returned (id -> PageRecord), for their delete"""
    expiry: tuple[float, list[str]] | None = None
    """where the expired pages this transaction read end: the last one's fetch time and the
    ids read with that fetch time"""

#: ids (pages, clusters, change log entries) a transaction reserves at most in one round trip
ID_BLOCK = 1024


class RedisEngine:
    """A connection to a Redis store's keys, its transactions and its staged reads (see the module)."""
    """A neardup store in Redis or a Redis Cluster (see the module)."""

    def __init__(self, url: str, *, timeout: float = 10.0, create: bool = True) -> None:
        try:
            import redis
            import redis.cluster
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise StoreError(f"Redis needs the 'redis' extra: pip install 'neardup[redis]' ({exc})") from None
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError,)
        self.path = redact(url)
        self.timeout = float(timeout)
        parts = urlsplit(url)
        query = parse_qs(parts.query)
        name = (query.pop("prefix", ["neardup"]) or ["neardup"])[-1]
        if not name or any(c in name for c in "{}: "):
            raise ConfigError(f"store {self.path}: prefix must be a name without braces, colons or spaces")
        try:
            self.lease = float(query.pop("lease", [str(LEASE)])[-1])
        except ValueError:
            self.lease = -1.0
        if not 0 < self.lease <= 3600:
            raise ConfigError(f"store {self.path}: lease must be a number of seconds in (0, 3600]")
        self.cluster = parts.scheme.endswith("+cluster")
        plain = parts._replace(scheme=parts.scheme.replace("+cluster", ""), query="").geturl()
        try:
            if self.cluster:
                self._r: Any = redis.cluster.RedisCluster.from_url(plain, socket_timeout=timeout,
                                                                   socket_connect_timeout=timeout)
            else:
                self._r = redis.Redis.from_url(plain, socket_timeout=timeout, socket_connect_timeout=timeout)
            self._r.ping()
        except (redis.RedisError, ValueError, IndexError) as exc:
            why = str(exc).splitlines()[0] if str(exc) else repr(exc)
            raise StoreError(f"cannot connect to Redis at {self.path}: {why}") from None
        self.prefix = f"nd{{{name}}}:"
        self._tx = _Tx()
        self._commit = self._script(_COMMIT)
        self._renew = self._script(_RENEW)
        self._release = self._script(_RELEASE)
        self._lookup = self._script(_LOOKUP)
        self._firsts = self._script(_FIRSTS)
        self._spec: str | None = None
        self._check_layout()

    def _script(self, source: str) -> Any:
        return self._r.register_script(source)

    def _k(self, *parts: object) -> str:
        return self.prefix + ":".join(str(p) for p in parts)

    def _call(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except self._errors as exc:
            raise StoreError(f"store {self.path}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                             ) from None

    def _check_layout(self) -> None:
        stored = self._call(self._r.hget, self._k("meta"), "redis_schema")
        if stored is None:
            self._call(self._r.hsetnx, self._k("meta"), "redis_schema", json.dumps(REDIS_SCHEMA))
            return
        try:
            version = int(json.loads(stored))
        except (ValueError, TypeError):
            raise StoreError(f"store {self.path} is damaged: redis_schema is {as_text(stored)!r}") from None
        if version > REDIS_SCHEMA:
            raise StoreError(f"store {self.path} has key layout {version}, newer than this neardup supports "
                             f"({REDIS_SCHEMA}); upgrade neardup")

    # -- plumbing ---------------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[None]:
        if self._tx.staging is not None:
            yield
            return
        token = uuid.uuid4().hex
        lock = self._k("lock")
        deadline = time.monotonic() + self.timeout
        pause = 0.001
        while not self._call(self._r.set, lock, token, None, int(self.lease * 1000), True):
            if time.monotonic() > deadline:
                raise StoreLockedError(f"store {self.path}: another writer held the lock for over {self.timeout} s")
            time.sleep(pause)
            pause = min(pause * 2, 0.02)
        self._tx.staging, self._tx.token, self._tx.renewed = Staging(), token, time.monotonic()
        self._tx.blocks, self._tx.expiry, self._tx.change_bounds, self._tx.expired_pages = {}, None, None, None
        try:
            yield
            self._flush(token)
        except BaseException:
            self._tx.staging = None
            self._call(self._release, [lock], [token])
            raise
        finally:
            self._tx.staging = self._tx.token = None
            self._tx.blocks = self._tx.expiry = self._tx.change_bounds = self._tx.expired_pages = None

    def _flush(self, token: str) -> None:
        staging = self._tx.staging
        assert staging is not None
        lock = self._k("lock")
        commands = [[cmd, key, *cargs] for cmd, key, cargs in staging.commands()]
        self._tx.staging = None
        if not commands:
            self._call(self._release, [lock], [token])
            return
        self._call(self._commit, [lock], [token, json.dumps(commands, separators=(",", ":"))])

    def _next_id(self, counter: str) -> int:
        """The next id of ``counter`` (``P next:<counter>``), inside a transaction: ids come in
        blocks (1, 2, 4, ... up to :data:`ID_BLOCK`) reserved with one INCRBY under the lease, so
        they rise in commit order and a transaction of n writes makes about log2(n) round trips
        for them; what a transaction leaves of its block is a gap, never reused."""
        blocks = self._tx.blocks
        assert blocks is not None, "an id outside a transaction"
        nxt, last, size = blocks.get(counter, (1, 0, 0))
        if nxt > last:
            size = min(max(1, size * 2), ID_BLOCK)
            last = int(self._call(self._r.incrby, self._k("next", counter), size))
            nxt = last - size + 1
        blocks[counter] = (nxt + 1, last, size)
        return nxt

    def _stage(self) -> Staging:
        """The open transaction's staging (renewing the lease now and then)."""
        staging = self._tx.staging
        assert staging is not None, "a write outside a transaction"
        now = time.monotonic()
        if now - self._tx.renewed > self.lease / 3:
            if not self._call(self._renew, [self._k("lock")], [self._tx.token, int(self.lease * 1000)]):
                raise StoreError(f"store {self.path}: the writers' lease ran out during a transaction")
            self._tx.renewed = now
        return staging

    def snapshot(self) -> Any:
        return nullcontext()

    def reading(self) -> Any:
        return nullcontext()

    def close(self) -> None:
        try:
            self._r.close()
        except self._errors:  # pragma: no cover - closing a dead connection
            pass

    def drop(self) -> int:
        """Delete every key of this store (its prefix); returns how many."""
        n = 0
        for key in self._r.scan_iter(match=self.prefix + "*", count=1000):
            n += int(self._r.delete(key))
        return n

    # -- reads through the staging ------------------------------------------------------
    def _get_many(self, keys: Sequence[str]) -> list[str | None]:
        """String values, the staged ones first; inside a transaction the values read are kept
        for its later reads (it holds the lease: no other writer can change them)."""
        s = self._tx.staging
        staged = s.strings if s is not None else {}
        known = s.read if s is not None else {}
        todo = list(dict.fromkeys(k for k in keys if k not in staged and k not in known))
        got = {k: None if v is None else as_text(v) for k, v in zip(todo, self._call(self._r.mget, todo))} \
            if todo else {}
        if s is not None:
            s.read.update(got)
        return [staged[k] if k in staged else known[k] if k in known else got[k] for k in keys]

    def _hget(self, key: str, field: str) -> str | None:
        s = self._tx.staging
        if s is not None:
            if field in s.fields.get(key, {}):
                return s.fields[key][field]
            if key in s.dropped:
                return None
        value = self._call(self._r.hget, key, field)
        delta = s.increments.get(key, {}).get(field, 0) if s is not None else 0
        if delta:
            return str(int(value or 0) + delta)
        return None if value is None else as_text(value)

    def _hget_plain(self, key: str) -> str | None:
        """A string key as the engine holds it (counters: not staged)."""
        value = self._call(self._r.get, key)
        return None if value is None else as_text(value)

    def _hmget(self, key: str, fields: list[str]) -> list[str | None]:
        if not fields:
            return []
        s = self._tx.staging
        if s is not None and (key in s.dropped or key in s.fields or key in s.increments):
            return [self._hget(key, f) for f in fields]
        return [None if v is None else as_text(v) for v in self._call(self._r.hmget, key, fields)]

    def _hgetall(self, key: str) -> dict[str, str]:
        s = self._tx.staging
        out = {} if s is not None and key in s.dropped else \
            {as_text(f): as_text(v) for f, v in self._call(self._r.hgetall, key).items()}
        if s is not None:
            for f, d in s.increments.get(key, {}).items():
                out[f] = str(int(out.get(f, 0)) + d)
            for f, v in s.fields.get(key, {}).items():
                if v is None:
                    out.pop(f, None)
                else:
                    out[f] = v
        return out

    def _zrange(self, key: str, lo: float = float("-inf"), hi: float = float("inf"), limit: int | None = None,
                after: str | None = None, skip: int = 0) -> list[tuple[str, float]]:
        """Members of a sorted set with scores in [lo, hi] (by score, then member; for a set of
        equal scores, ``after``: members after this one by name), at most ``limit``; ``skip``:
        the engine leaves out the range's first ``skip`` members, which the caller knows this
        transaction removed (with their scores, :meth:`Staging.zrem`)."""
        return self._zfirst_many([key], lo, hi, limit, after, skip)[key]

    def _zfirst_many(self, keys: Sequence[str], lo: float = float("-inf"), hi: float = float("inf"),
                     limit: int | None = None, after: str | None = None,
                     skip: int = 0) -> dict[str, list[tuple[str, float]]]:
        """:meth:`_zrange` of several keys in one pipelined round trip, each merged with what
        this thread has staged under it."""
        s = self._tx.staging
        asked = [k for k in keys if s is None or k not in s.dropped]
        # what the engine is asked for beyond ``limit``: the members this transaction removed
        # that can lie in the range, but those ``skip`` leaves out (they come back and are
        # dropped here)
        extra = {k: max(0, s.removals_within(k, lo, hi) - skip) if s is not None and after is None
                 else sum(1 for v in (s.members.get(k, {}) if s is not None else {}).values() if v is None)
                 for k in asked}
        def ask(client: Any, k: str) -> Any:
            if after is not None:
                return client.zrangebylex(k, f"({after}" if after else "-", "+", 0,
                                          -1 if limit is None else limit + extra[k])
            if limit is None and skip == 0:
                return client.zrangebyscore(k, lo, hi, None, None, True)
            return client.zrangebyscore(k, lo, hi, skip, -1 if limit is None else limit + extra[k], True)

        raw: list[Any] = []
        if len(asked) == 1:  # one key: a plain command (a pipeline costs more in the client)
            raw = [self._call(ask, self._r, asked[0])]
        elif asked and after is None:  # one script for them all (a command each costs the client more)
            counts = [str(-1 if limit is None else limit + extra[k]) for k in asked]
            flat = self._call(self._firsts, asked, [_score(lo), _score(hi), str(skip), *counts])
            raw = [list(zip(f[::2], f[1::2])) for f in flat]
        elif asked:
            pipe = self._r.pipeline(transaction=False)
            for k in asked:
                ask(pipe, k)
            raw = self._call(pipe.execute)
        served = dict(zip(asked, raw))
        out: dict[str, list[tuple[str, float]]] = {}
        for k in keys:
            got = [(as_text(m), 0.0) for m in served.get(k, [])] if after is not None else \
                [(as_text(m), float(sc)) for m, sc in served.get(k, [])]
            pending = s.members.get(k, {}) if s is not None else {}
            if pending:
                merged = dict(got)
                for m, sc in pending.items():
                    if sc is None:
                        merged.pop(m, None)
                    elif (after is not None and m > after) or (after is None and lo <= sc <= hi):
                        merged[m] = sc
                got = sorted(merged.items(), key=lambda kv: (kv[1], kv[0]))
            out[k] = got if limit is None else got[:limit]
        return out

    def _zcard(self, key: str) -> int:
        s = self._tx.staging
        pending = s.members.get(key, {}) if s is not None else {}
        if s is not None and key in s.dropped:
            return sum(1 for v in pending.values() if v is not None)
        n = int(self._call(self._r.zcard, key))
        if pending:
            members = list(pending)
            there = self._call(self._r.zmscore, key, members)
            for m, sc in zip(members, there):
                n += (pending[m] is not None) - (sc is not None)
        return n

