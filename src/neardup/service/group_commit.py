"""Group commits: the single adds that arrive while the previous commit runs are decided and
recorded together, in one transaction (:meth:`Detector.add_fingerprints`, in arrival order:
the verdicts sequential adds would give), and each request is answered only after the
commit that holds it. One commit a batch instead of one an add is what lets a store whose
commit costs a round trip and a disk flush (PostgreSQL, SQLite with ``synchronous=FULL``, a
Redis with AOF ``always``) take thousands of adds a second.

An add that its batch refuses (a bad URL, another spec) is run again by itself, so that its
request gets the very error :meth:`Detector.add_fingerprint` raises; a commit that fails
fails every request of its batch (none of them was stored).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from neardup.detector.core import Detector
from neardup.errors import NeardupError
from neardup.fingerprint.core import Fingerprint
from neardup.model import Verdict

#: adds in one commit at most (a longer queue is committed in several)
MAX_GROUP = 1000

_Item = tuple[str, Fingerprint, Any, Any]


class GroupCommit:
    """The queue of single adds of one service (see the module)."""

    def __init__(self, detector: Detector, locked: Callable[..., Awaitable[Any]], max_group: int = MAX_GROUP) -> None:
        """``locked``: runs a function under the service's decision lock (``Service.locked``)."""
        self.detector = detector
        self.locked = locked
        self.max_group = max_group
        self.pending: list[tuple[_Item, asyncio.Future[Verdict]]] = []
        self.draining: asyncio.Task[None] | None = None
        self.commits = 0
        """commits run so far (each one transaction)"""
        self.adds = 0
        """adds committed so far"""

    async def add(self, url: str, fp: Fingerprint, *, fetched_at: Any = None, priority: Any = None) -> Verdict:
        """:meth:`Detector.add_fingerprint`, answered once its group's commit is done."""
        future: asyncio.Future[Verdict] = asyncio.get_running_loop().create_future()
        self.pending.append(((url, fp, fetched_at, priority), future))
        if self.draining is None:
            self.draining = asyncio.get_running_loop().create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        """Commit what is queued, then what queued up meanwhile, until the queue is empty."""
        try:
            while self.pending:
                group, self.pending = self.pending[:self.max_group], self.pending[self.max_group:]
                try:
                    answers = await self.locked(self._commit, [item for item, _ in group], inline=False)
                except BaseException as exc:  # the commit failed: nothing of this group is stored
                    for _, future in group:
                        if not future.done():
                            future.set_exception(exc)
                    if not isinstance(exc, Exception):
                        raise
                    continue
                for (_, future), answer in zip(group, answers):
                    if future.done():  # the client went away; its add is stored all the same
                        continue
                    if isinstance(answer, BaseException):
                        future.set_exception(answer)
                    else:
                        future.set_result(answer)
        finally:
            self.draining = None

    def _commit(self, items: list[_Item]) -> list[Verdict | NeardupError]:
        """In a thread, under the decision lock: one transaction for ``items``; the error of
        each refused one, as adding it alone raises it."""
        detector = self.detector
        verdicts: list[Verdict | NeardupError] = list(detector.add_fingerprints(items))
        self.commits += 1
        self.adds += len(items)
        for i, verdict in enumerate(verdicts):
            if isinstance(verdict, Verdict) and verdict.status == "error":
                url, fp, fetched_at, priority = items[i]
                try:
                    verdicts[i] = detector.add_fingerprint(url, fp, fetched_at=fetched_at, priority=priority)
                except NeardupError as exc:
                    verdicts[i] = exc
        return verdicts
