"""Injected failures for the all-or-nothing tests (a write that fails half way)."""

from __future__ import annotations

from typing import Any


class Boom(RuntimeError):
    """The simulated failure."""


def explode_on_cluster_update(det: Any, monkeypatch: Any) -> None:
    """Make ``det`` fail when a write reaches its cluster update (after the page row and the
    index have changed): the cluster change every add makes, whether or not it then writes
    the cluster's row (an unchanged row is not written again)."""
    def boom(*args: Any, **kwargs: Any) -> None:
        raise Boom("simulated failure in the middle of a write")

    monkeypatch.setattr(det.clusters, "change", boom)
    monkeypatch.setattr(det.store, "set_cluster", boom)
