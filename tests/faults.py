"""Injected failures for the all-or-nothing tests (a write that fails half way)."""

from __future__ import annotations

from typing import Any


class Boom(RuntimeError):
    """The simulated failure."""


def explode_on_cluster_update(det: Any, monkeypatch: Any) -> None:
    """Make ``det``'s store fail when a write reaches its cluster update (after the page
    row and the index have changed)."""
    def boom(*args: Any, **kwargs: Any) -> None:
        raise Boom("simulated failure in the middle of a write")

    monkeypatch.setattr(det.store, "set_cluster", boom)
