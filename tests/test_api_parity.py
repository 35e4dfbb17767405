"""Detector and Client cannot drift: both implement neardup.detector.api.DetectorAPI with the same
parameters (names, kinds, defaults, annotations) and return annotations, and every public
method of either is in the protocol or declared here as one side's own, with the reason."""

from __future__ import annotations

import inspect
import typing

import pytest

pytest.importorskip("httpx")

from neardup import (
    Client,  # noqa: E402
    Detector,  # noqa: E402
)
from neardup.detector.api import DetectorAPI  # noqa: E402

OPERATIONS = sorted(name for name, value in vars(DetectorAPI).items() if not name.startswith("_") and callable(value))

#: parameters one side has beyond the protocol's (keyword-only, with a default): why
EXTRA_PARAMETERS = {
    ("Detector", "hosts", "host"): "one host's row; Client.host... is GET /v1/hosts/{host}",
    ("Client", "hosts", "offset"): "paging over HTTP (GET /v1/hosts?offset=)",
}

#: public methods of one side only: why
ONLY = {
    ("Detector", "open"): "constructor",
}


def _hints(fn) -> dict:
    return typing.get_type_hints(fn)


def _params(cls: type, name: str) -> tuple[list[inspect.Parameter], dict]:
    fn = getattr(cls, name)
    return list(inspect.signature(fn).parameters.values())[1:], _hints(fn)


@pytest.mark.parametrize("name", OPERATIONS)
@pytest.mark.parametrize("cls", [Detector, Client])
def test_same_signature_as_the_protocol(cls, name):
    want, want_hints = _params(DetectorAPI, name)
    got, got_hints = _params(cls, name)
    assert want_hints.get("return") == got_hints.get("return"), f"{cls.__name__}.{name} returns another type"
    by_name = {p.name: p for p in got}
    for p in want:
        q = by_name.get(p.name)
        assert q is not None, f"{cls.__name__}.{name} lacks parameter {p.name}"
        assert q.kind == p.kind, f"{cls.__name__}.{name}({p.name}) is {q.kind}, the protocol's is {p.kind}"
        assert q.default == p.default, f"{cls.__name__}.{name}({p.name}) defaults to {q.default!r}, not {p.default!r}"
        assert got_hints.get(p.name) == want_hints.get(p.name), f"{cls.__name__}.{name}({p.name}) has another type"
    assert [p.name for p in got if p.name in {w.name for w in want}] == [p.name for p in want], \
        f"{cls.__name__}.{name}: parameters in another order"
    for q in got:
        if q.name not in {p.name for p in want}:
            assert (cls.__name__, name, q.name) in EXTRA_PARAMETERS, f"{cls.__name__}.{name} has an undeclared {q.name}"
            assert q.kind == q.KEYWORD_ONLY and q.default is not q.empty


def test_both_are_detector_apis():
    assert isinstance(Detector(), DetectorAPI)
    with Client("http://127.0.0.1:9") as client:
        assert isinstance(client, DetectorAPI)


@pytest.mark.parametrize("cls", [Detector, Client])
def test_every_public_method_is_shared_or_declared(cls):
    public = {n for n, v in vars(cls).items() if not n.startswith("_") and (callable(v) or isinstance(v, classmethod))}
    undeclared = public - set(OPERATIONS) - {n for c, n in ONLY if c == cls.__name__}
    assert not undeclared, f"{cls.__name__}: public methods neither in DetectorAPI nor declared: {undeclared}"
    for c, n in ONLY:
        if c == cls.__name__:
            assert n in public, f"ONLY lists {c}.{n}, which no longer exists"
