"""Learned URL rules (DUST): which URL differences never change a host's content.

A crawler meets the same page under many URLs of one host: session ids and tracking
parameters (``sid``, ``utm_source``), reordered parameters, print versions (``/print/...``),
``index.html`` and trailing slashes, calendars that link to endless dates. Once some of them
were fetched and found to be duplicates (same cluster), the differences between their URLs
suggest rewrite rules (Bar-Yossef, Keidar, Schonfeld, "Do not crawl in the DUST", WWW 2007;
Dasgupta, Kumar, Sasturkar, "De-duping URLs via rewrite rules", KDD 2008). A rule of a host
is kept only when it has at least ``min_support`` merges of different URLs with one content
and **no counter-example** (two URLs it would make equal whose contents differ), or at most one
per :data:`MERGES_PER_COUNTER_EXAMPLE` merges (:func:`tolerated`): a parameter that changes the
content is never learned, a rule is dropped as soon as fetches contradict it, and 390
session-id merges are not undone by two pages extracted differently.

Rule kinds (``Rule.name``):

- ``drop-param:NAME``: query parameter ``NAME`` never changes the content;
- ``drop-params:A,B``: nor do parameters that come and go together (``utm_source,utm_medium``);
- ``sort-params``: the order of the query parameters does not matter;
- ``index-file:NAME``: ``.../NAME`` (e.g. ``index.html``) is the page of its folder ``.../``;
- ``trailing-slash``: ``/a/`` and ``/a`` are the same page;
- ``drop-segment:NAME``: a path segment ``NAME`` is an alias of its parent (``/print/a`` = ``/a``);
- ``any-digits:PATTERN``: the digits of paths of this pattern (digit runs as ``N``) never
  change the content (a calendar trap: ``/calendar/N-N-N``).

Alias rules relate two origins rather than two URLs of one host: the same path and query
keeps landing in one cluster on both (support: paths merged, counter-example: a path whose
two pages are in different clusters). An origin is a host with its port where that is not
the default (:func:`neardup.urls.origin_of`): a mirror on another port is an origin of its own.

- ``scheme-alias:http=https``: ``http://HOST/x`` and ``https://HOST/x`` are one page;
- ``host-alias:A=B``: hosts ``A`` and ``B`` serve the same page at every path, over either
  scheme (``www.example.com``/``example.com``, ``m.example.com``, a mirror host). ``A`` is
  the longer name (``host-alias:www.example.com=example.com``, ``host-alias:a:8702=a:8701``);
  the rule is listed under both.

>>> obs = [(f"https://a.example/p?id=1&sid={i}", 1) for i in range(4)]
>>> obs += [(f"https://a.example/p?id=2&sid={i}", 2) for i in range(4, 8)]
>>> [r.name for r in learn(obs)]
['drop-param:sid']
>>> rules = RuleLearner()
>>> for url, cluster in obs:
...     rules.observe(url, cluster)
>>> m = rules.match("https://a.example/p?sid=99&id=2")
>>> m.known_url, m.rules
('https://a.example/p?id=2&sid=4', ('drop-param:sid',))
>>> for i in range(3):
...     rules.observe(f"https://www.b.example/n/{i}", 10 + i)
...     rules.observe(f"https://b.example/n/{i}", 10 + i)
>>> rules.match("http://b.example/n/2").rules
('host-alias:www.b.example=b.example',)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from neardup.urls import origin_of, url_at

#: merges of different URLs with one content a rule needs before it is used
DEFAULT_MIN_SUPPORT = 3
#: a rule keeps at most one counter-example per this many merges (:func:`tolerated`)
MERGES_PER_COUNTER_EXAMPLE = 20
#: each member of a cluster is compared with at most this many other members for candidates
MAX_PAIRS_PER_MEMBER = 8
_INDEX_FILE = re.compile(r"^(index|default|home)\.[a-z0-9]{1,5}$", re.IGNORECASE)
_DIGITS = re.compile(r"\d+")
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Rule:
    """A learned rule of ``host``: ``kind`` (with ``value``), ``support`` (URL merges with one
    content that it explains) and an ``example`` pair of URLs it merged. An alias rule
    (``scheme-alias``, ``host-alias``) relates two origins; :attr:`hosts` names the hosts it
    applies to."""

    host: str
    kind: str
    value: str = ""
    support: int = 0
    example: tuple[str, str] | None = None
    #: pairs of URLs it makes equal whose contents differ (:func:`tolerated`)
    counter: int = 0

    @property
    def name(self) -> str:
        """The rule as :attr:`RuleMatch.rules` and ``should_fetch`` name it.

        >>> Rule("www.a.example", "host-alias", "www.a.example=a.example").name
        'host-alias:www.a.example=a.example'
        """
        return f"{self.kind}:{self.value}" if self.value else self.kind

    @property
    def hosts(self) -> tuple[str, ...]:
        """The hosts the rule applies to: both of a ``host-alias``, else its own.

        >>> Rule("www.a.example", "host-alias", "www.a.example=a.example").hosts
        ('www.a.example', 'a.example')
        """
        if self.kind == "host-alias":
            a, _, b = self.value.partition("=")
            return (a, b)
        return (self.host,)

    def describe(self) -> str:
        """One line saying what the rule means and on what evidence.

        >>> Rule("a.example", "scheme-alias", "http=https", 4).describe()
        'a.example: http:// and https:// serve the same page at every path (4 merges, no counter-example)'
        """
        a, b = (*self.hosts, "")[:2]
        what = {
            "drop-param": f"query parameter {self.value!r} never changes the content",
            "drop-params": f"query parameters {self.value!r} never change the content",
            "sort-params": "the order of query parameters does not matter",
            "index-file": f"'.../{self.value}' is the page of its folder '.../'",
            "trailing-slash": "'/a/' and '/a' are the same page",
            "drop-segment": f"path segment {self.value!r} is an alias of its parent ('/{self.value}/a' = '/a')",
            "any-digits": f"the digits of paths like {self.value!r} never change the content",
            "scheme-alias": "http:// and https:// serve the same page at every path",
            "host-alias": f"hosts {a!r} and {b!r} serve the same page at every path (either scheme)",
        }.get(self.kind, self.name)
        against = f"{self.counter or 'no'} counter-example{'s' if self.counter > 1 else ''}"
        return f"{self.host}: {what} ({self.support} merges, {against})"

    def to_dict(self) -> dict[str, Any]:
        """The rule as JSON-ready values (``neardup rules``, ``GET /v1/rules``).

        >>> d = Rule("a.example", "scheme-alias", "http=https", 3).to_dict()
        >>> d["rule"], d["hosts"], d["support"]
        ('scheme-alias:http=https', ['a.example'], 3)
        """
        return {"host": self.host, "hosts": list(self.hosts), "rule": self.name, "kind": self.kind,
                "value": self.value, "support": self.support, "counter_examples": self.counter,
                "example": list(self.example) if self.example else None, "description": self.describe()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Rule:
        """The rule :meth:`to_dict` wrote (``neardup.Client`` reads the service's answers).

        >>> r = Rule("a.example", "drop-param", "sid", 4, ("https://a.example/?sid=1", "https://a.example/"))
        >>> Rule.from_dict(r.to_dict()) == r
        True
        """
        example = data.get("example")
        return cls(str(data["host"]), str(data["kind"]), str(data.get("value") or ""), int(data.get("support") or 0),
                   (str(example[0]), str(example[1])) if example else None, int(data.get("counter_examples") or 0))


@dataclass(frozen=True)
class RuleMatch:
    """A URL that the rules of its host, or its alias rules, map to a known page:
    ``known_url`` (its cluster ``cluster_id``), through ``rules`` (the names of the rules that
    rewrote it, in order)."""

    url: str
    known_url: str
    cluster_id: int
    rules: tuple[str, ...]


@dataclass
class _Parts:
    base: str            # scheme://host[:port]
    segs: list[str]      # path split on "/", the leading "" included
    query: list[tuple[str, str]]


def _parse(url: str) -> _Parts:
    p = urlsplit(url.strip())
    scheme = p.scheme.lower()
    try:
        port = p.port
    except ValueError:
        port = None
    host = (p.hostname or "").lower()
    netloc = host if port in (None, _DEFAULT_PORTS.get(scheme)) else f"{host}:{port}"
    return _Parts(f"{scheme}://{netloc}", (p.path or "/").split("/"), parse_qsl(p.query, keep_blank_values=True))


def normalize(url: str, names: frozenset[str] | set[str] = frozenset()) -> tuple[str, tuple[str, ...]]:
    """The key of ``url`` under the rules named ``names`` (all of one host) and the names of
    the rules that changed it. Without rules: lower-case scheme and host, default port and
    fragment dropped.

    >>> key, fired = normalize("HTTP://A.example/print/x/index.html?b=2&utm_source=m&a=1#top",
    ...                        {"drop-param:utm_source", "sort-params", "index-file:index.html",
    ...                         "trailing-slash", "drop-segment:print"})
    >>> key
    'http://a.example/x?a=1&b=2'
    >>> fired
    ('drop-segment:print', 'index-file:index.html', 'trailing-slash', 'drop-param:utm_source', 'sort-params')
    """
    parts = _parse(url)
    fired: list[str] = []
    segs = parts.segs
    if names:
        dropped = [s for s in segs[1:-1] if f"drop-segment:{s}" in names]
        if dropped:
            fired.extend(dict.fromkeys(f"drop-segment:{s}" for s in dropped))
            segs = [segs[0]] + [s for s in segs[1:-1] if f"drop-segment:{s}" not in names] + [segs[-1]]
        last = segs[-1]
        if last and f"index-file:{last}" in names:
            segs = segs[:-1] + [""]
            fired.append(f"index-file:{last}")
        if "trailing-slash" in names and len(segs) > 2 and segs[-1] == "":
            segs = segs[:-1]
            fired.append("trailing-slash")
    path = "/".join(segs) or "/"
    if names:
        pattern = _DIGITS.sub("N", path)
        if pattern != path and f"any-digits:{pattern}" in names:
            path = pattern
            fired.append(f"any-digits:{pattern}")
    query = parts.query
    if names and query:
        drop: dict[str, str] = {}  # parameter -> the rule dropping it
        for n in names:
            if n.startswith("drop-params:"):
                for k in n[12:].split(","):
                    drop.setdefault(k, n)
        for n in names:
            if n.startswith("drop-param:"):
                drop[n[11:]] = n
        kept_q = [(k, v) for k, v in query if k not in drop]
        if len(kept_q) != len(query):
            fired.extend(dict.fromkeys(drop[k] for k, _ in query if k in drop))
            query = kept_q
        if "sort-params" in names and query != sorted(query):
            query = sorted(query)
            fired.append("sort-params")
    key = parts.base + path + ("?" + urlencode(query) if query else "")
    return key, tuple(fired)


def _candidates(a: str, b: str) -> set[str]:
    """Rules that could explain why URLs ``a`` and ``b`` (one content) differ."""
    pa, pb = _parse(a), _parse(b)
    out: set[str] = set()
    if pa.base != pb.base:
        return out
    qa, qb = pa.query, pb.query
    if qa != qb:
        da: dict[str, list[str]] = {}
        db: dict[str, list[str]] = {}
        for k, v in qa:
            da.setdefault(k, []).append(v)
        for k, v in qb:
            db.setdefault(k, []).append(v)
        differ = sorted(k for k in set(da) | set(db) if da.get(k) != db.get(k))
        out.update(f"drop-param:{k}" for k in differ)
        if 1 < len(differ) <= 4:  # parameters that always come and go together (utm_source + utm_medium)
            out.add("drop-params:" + ",".join(differ))
        if len(qa) > 1 and len(qb) > 1 and da == db:
            out.add("sort-params")
        elif len(qa) > 1 or len(qb) > 1:
            out.add("sort-params")  # parameters both dropped and reordered
    sa, sb = pa.segs, pb.segs
    if sa != sb:
        for x, y in ((sa, sb), (sb, sa)):
            if x[-1] and _INDEX_FILE.match(x[-1]):
                out.add(f"index-file:{x[-1]}")
            if len(x) > 2 and x[-1] == "" and (x[:-1] == y or x[:-1] == y[:-1] + [""] or _INDEX_FILE.match(y[-1])):
                out.add("trailing-slash")
            if len(x) > 2 and x[-1] == "" and y[-1] != "" and x[:-1] != y[:-1]:
                out.add("trailing-slash")
            if len(x) == len(y) + 1:
                for i in range(1, len(x) - 1):
                    if x[:i] + x[i + 1:] == y and x[i]:
                        out.add(f"drop-segment:{x[i]}")
                        break
        path_a, path_b = "/".join(sa), "/".join(sb)
        pat = _DIGITS.sub("N", path_a)
        if pat != path_a and pat == _DIGITS.sub("N", path_b):
            out.add(f"any-digits:{pat}")
    return out


def _evaluate(obs: list[tuple[str, int]], names: frozenset[str],
              rule: str) -> tuple[int, int, tuple[str, str] | None]:
    """(support, counter-examples, example pair) of adding ``rule`` to ``names``."""
    with_rule = names | {rule}
    groups: dict[str, dict[str, tuple[str, int]]] = {}
    for url, cluster in obs:
        key = normalize(url, with_rule)[0]
        groups.setdefault(key, {}).setdefault(normalize(url, names)[0], (url, cluster))
    support = counter = 0
    example = None
    for members in groups.values():
        if len(members) < 2:
            continue
        clusters = {c for _, c in members.values()}
        if len(clusters) > 1:
            counter += 1
        else:
            support += len(members) - 1
            if example is None:
                urls = sorted(u for u, _ in members.values())
                example = (urls[0], urls[1])
    return support, counter, example


def tolerated(support: int, counter: int) -> bool:
    """Whether ``counter`` counter-examples leave a rule of ``support`` merges standing: none
    below :data:`MERGES_PER_COUNTER_EXAMPLE` merges, then one per that many.

    >>> tolerated(3, 0), tolerated(19, 1), tolerated(20, 1), tolerated(390, 19), tolerated(390, 20)
    (True, False, True, True, False)
    """
    return counter * MERGES_PER_COUNTER_EXAMPLE <= support


def _rank(support: int, name: str) -> tuple[int, int]:
    """Order of preference: parameters dropped together, the fewest first; then support."""
    together = name[12:].count(",") + 1 if name.startswith("drop-params:") else 0
    return (together, -support)


def learn_host(host: str, obs: list[tuple[str, int]], min_support: int = DEFAULT_MIN_SUPPORT) -> list[Rule]:
    """The rules of one host from its pages ``obs`` (url, cluster id), greedily: the
    candidate with the most support and no counter-example first, then the next one given
    the rules already taken, until none qualifies."""
    by_cluster: dict[int, list[str]] = {}
    for url, cluster in obs:
        by_cluster.setdefault(cluster, []).append(url)
    cands: set[str] = set()
    for urls in by_cluster.values():
        if len(urls) < 2:
            continue
        for i, a in enumerate(urls):
            for b in urls[max(0, i - MAX_PAIRS_PER_MEMBER):i]:
                cands |= _candidates(a, b)
    taken: list[Rule] = []
    names: frozenset[str] = frozenset()
    rejected: set[str] = set()
    while True:
        best: tuple[int, str, tuple[str, str] | None, int] | None = None
        # single rules first; parameters dropped together only where no single rule qualifies
        for joint in (False, True):
            for cand in sorted(cands - names - rejected):
                if cand.startswith("drop-params:") != joint:
                    continue
                support, counter, example = _evaluate(obs, names, cand)
                if not tolerated(support, counter):
                    rejected.add(cand)
                elif support >= min_support and (best is None or _rank(support, cand) < _rank(best[0], best[1])):
                    best = (support, cand, example, counter)
            if best is not None:
                break
        if best is None:
            return taken
        support, cand, example, counter = best
        kind, _, value = cand.partition(":")
        taken.append(Rule(host, kind, value, support, example, counter))
        names = names | {cand}


def _origin(url: str) -> tuple[str, str, str] | None:
    """(scheme, origin, path and query) of an http(s) URL (:func:`neardup.urls.origin_of`),
    the unit alias rules compare; None for any other URL."""
    try:
        p = urlsplit(url.strip())
    except ValueError:
        return None
    scheme, origin = p.scheme.lower(), origin_of(url.strip())
    if scheme not in _DEFAULT_PORTS or not origin:
        return None
    return scheme, origin, (p.path or "/") + ("?" + p.query if p.query else "")


def _alias_pair(a: str, b: str) -> tuple[str, str]:
    """The two hosts of a ``host-alias`` in the order its name writes them: the longer name
    first (``www.example.com=example.com``), then alphabetical."""
    return (a, b) if (-len(a), a) <= (-len(b), b) else (b, a)


#: host -> path and query -> scheme -> (cluster, url): the evidence of alias rules
_AliasPages = dict[str, dict[str, dict[str, tuple[int, str]]]]
#: a host's alias partners are looked for among at most this many hosts per (path, cluster)
MAX_ALIAS_PARTNERS = 64


def _scheme_rule(host: str, rests: dict[str, dict[str, tuple[int, str]]], min_support: int) -> Rule | None:
    """The ``scheme-alias`` rule of ``host`` if its pages support it."""
    support = counter = 0
    example: tuple[str, str] | None = None
    for by_scheme in rests.values():
        if len(by_scheme) == 2:
            (c_http, u_http), (c_https, u_https) = by_scheme["http"], by_scheme["https"]
            if c_http != c_https:
                counter += 1
                continue
            support += 1
            example = example or (u_http, u_https)
    if support < min_support or not tolerated(support, counter):
        return None
    return Rule(host, "scheme-alias", "http=https", support, example, counter)


def _pair_rule(pages: _AliasPages, a: str, b: str, min_support: int) -> Rule | None:
    """The ``host-alias`` rule of hosts ``a`` and ``b`` (in :func:`_alias_pair` order) if
    their pages support it: every path known on both in one cluster, at least
    ``min_support`` of them."""
    pa, pb = pages.get(a, {}), pages.get(b, {})
    small, large = (pa, pb) if len(pa) <= len(pb) else (pb, pa)
    support = counter = 0
    example: tuple[str, str] | None = None
    for rest, by_scheme in small.items():
        other = large.get(rest)
        if other is None:
            continue
        if len({c for c, _ in by_scheme.values()} | {c for c, _ in other.values()}) > 1:
            counter += 1
            continue
        support += 1
        if example is None:
            u1, u2 = sorted((next(iter(by_scheme.values()))[1], next(iter(other.values()))[1]))
            example = (u1, u2)
    if support < min_support or not tolerated(support, counter):
        return None
    return Rule(a, "host-alias", f"{a}={b}", support, example, counter)


def learn_aliases(obs: Iterable[tuple[str, int | None]], min_support: int = DEFAULT_MIN_SUPPORT) -> list[Rule]:
    """The ``scheme-alias`` and ``host-alias`` rules from ``(url, cluster id)`` pairs: an
    origin pair whose same paths landed in one cluster at least ``min_support`` times and
    never in different clusters, sorted by host then support (what a :class:`RuleLearner`
    that observed the pairs answers).

    >>> obs = [(f"{s}://{h}/n/{i}", i) for s in ("http", "https") for h in ("www.a.example", "a.example")
    ...        for i in range(3)]
    >>> [(r.host, r.name, r.support) for r in learn_aliases(obs)]
    [('a.example', 'scheme-alias:http=https', 3),
     ('www.a.example', 'host-alias:www.a.example=a.example', 3),
     ('www.a.example', 'scheme-alias:http=https', 3)]
    >>> obs += [("https://a.example/n/9", 9), ("https://www.a.example/n/9", 8)]
    >>> [(r.host, r.name) for r in learn_aliases(obs)]            # one counter-example is enough
    [('a.example', 'scheme-alias:http=https'), ('www.a.example', 'scheme-alias:http=https')]
    """
    learner = RuleLearner(min_support)
    for url, cluster in obs:
        if cluster is not None:
            learner.observe(url, int(cluster))
    return learner.alias_rules()


def learn(obs: Iterable[tuple[str, int | None]], min_support: int = DEFAULT_MIN_SUPPORT) -> list[Rule]:
    """The rules of every host from ``(url, cluster id)`` pairs (pages without a cluster,
    e.g. empty ones, carry no evidence), sorted by host then support: each host's own URL
    rules (:func:`learn_host`), then its alias rules (:func:`learn_aliases`)."""
    hosts: dict[str, list[tuple[str, int]]] = {}
    for url, cluster in obs:
        if cluster is not None:
            hosts.setdefault(origin_of(url), []).append((url, int(cluster)))
    aliases: dict[str, list[Rule]] = {}
    for rule in learn_aliases(((u, c) for pages in hosts.values() for u, c in pages), min_support):
        aliases.setdefault(rule.host, []).append(rule)
    out: list[Rule] = []
    for host in sorted(hosts):
        out.extend(learn_host(host, hosts[host], min_support))
        out.extend(aliases.get(host, []))
    return out


class RuleLearner:
    """Rules kept up to date as pages are observed, and the lookup a crawler asks before a
    fetch (:meth:`match`). A host's rules, and the alias rules of the host, are re-learned
    when its pages changed by a tenth since the last time (every change while it has fewer
    than ten pages), so learning costs O(n log n) over a crawl of a host, not O(n^2), and no
    lookup waits on more than one host's pages (and its partners'). A rule that a new page
    contradicts is dropped at once."""

    def __init__(self, min_support: int = DEFAULT_MIN_SUPPORT) -> None:
        self.min_support = min_support
        self._obs: dict[str, dict[str, int]] = {}        # host -> url -> cluster
        self._rules: dict[str, list[Rule]] = {}
        self._keys: dict[str, dict[str, str]] = {}       # host -> key -> url
        self._learned_at: dict[str, int] = {}
        self._changes: dict[str, int] = {}
        # alias rules: the evidence, (path, cluster) -> hosts, the rules, per-host freshness
        self._alias_pages: _AliasPages = {}
        self._rest_hosts: dict[tuple[str, int], set[str]] = {}
        self._scheme_rules: dict[str, Rule] = {}
        self._pair_rules: dict[tuple[str, str], Rule] = {}
        self._partners: dict[str, set[str]] = {}         # host -> hosts it has a host-alias with
        self._alias_at: dict[str, int] = {}              # pages at the last learning; -1: contradicted
        self._alias_changes: dict[str, int] = {}

    def observe(self, url: str, cluster_id: int | None) -> None:
        """Record that ``url`` holds content of cluster ``cluster_id`` (None: no evidence;
        an earlier observation of the URL is forgotten). A new page that contradicts a rule
        (its key is a known page of another cluster) drops the host's rules at once, and one
        that contradicts an alias rule (the same path holds another cluster on the other
        scheme or the alias host) drops the alias rules of both hosts."""
        host = origin_of(url)
        pages = self._obs.setdefault(host, {})
        if cluster_id is None:
            if pages.pop(url, None) is not None:
                self._changes[host] = self._changes.get(host, 0) + 1
                self._alias_observe(url, None)
            return
        if pages.get(url) == cluster_id:
            return
        pages[url] = cluster_id
        self._changes[host] = self._changes.get(host, 0) + 1
        keys = self._keys.get(host)
        if keys is not None:
            rules = self._rules.get(host) or []
            key, fired = normalize(url, frozenset(r.name for r in rules))
            known = keys.get(key)
            if known is not None and known != url and pages.get(known) != cluster_id and fired:
                self._learned_at[host] = -1  # contradicted: re-learn before the next use
            else:
                keys.setdefault(key, url)
        self._alias_observe(url, cluster_id)

    def _alias_observe(self, url: str, cluster: int | None) -> None:
        o = _origin(url)
        if o is None:
            return
        scheme, host, rest = o
        rests = self._alias_pages.setdefault(host, {})
        by_scheme = rests.get(rest, {})
        before = {c for c, _ in by_scheme.values()}
        if cluster is None:
            if by_scheme.get(scheme, (0, ""))[1] != url:
                return
            by_scheme = {k: v for k, v in by_scheme.items() if k != scheme}
        else:
            by_scheme = {**by_scheme, scheme: (cluster, url)}
        if by_scheme:
            rests[rest] = by_scheme
        else:
            rests.pop(rest, None)
            if not rests:
                del self._alias_pages[host]
        after = {c for c, _ in by_scheme.values()}
        for c in before - after:
            hosts = self._rest_hosts.get((rest, c))
            if hosts is not None:
                hosts.discard(host)
                if not hosts:
                    del self._rest_hosts[(rest, c)]
        for c in after - before:
            self._rest_hosts.setdefault((rest, c), set()).add(host)
        self._alias_changes[host] = self._alias_changes.get(host, 0) + 1
        if cluster is None:
            return
        for sharing in islice(self._rest_hosts.get((rest, cluster), ()), MAX_ALIAS_PARTNERS):
            if sharing != host:  # new evidence for the other host's pairs too
                self._alias_changes[sharing] = self._alias_changes.get(sharing, 0) + 1
        if host in self._scheme_rules and len(after) > 1:
            self._alias_at[host] = -1  # contradicted: re-learn before the next use
        for partner in self._partners.get(host, ()):
            other = self._alias_pages.get(partner, {}).get(rest)
            if other is not None and len(after | {c for c, _ in other.values()}) > 1:
                self._alias_at[host] = self._alias_at[partner] = -1

    def forget(self, url: str) -> None:
        """Forget the observation of ``url`` (its page was deleted or is empty now)."""
        self.observe(url, None)

    def _fresh(self, host: str) -> None:
        changes = self._changes.get(host, 0)
        if not changes and host in self._rules:
            return
        at = self._learned_at.get(host, 0)
        if at >= 0 and host in self._rules and changes < max(1, at // 10):
            return
        pages = self._obs.get(host, {})
        obs = list(pages.items())
        rules = learn_host(host, obs, self.min_support)
        names = frozenset(r.name for r in rules)
        keys: dict[str, str] = {}
        for url, _ in obs:
            keys.setdefault(normalize(url, names)[0], url)
        self._rules[host], self._keys[host] = rules, keys
        self._learned_at[host], self._changes[host] = len(obs), 0

    def _fresh_alias(self, host: str) -> None:
        at = self._alias_at.get(host)
        if at is not None and at >= 0 and self._alias_changes.get(host, 0) < max(1, at // 10):
            return
        rests = self._alias_pages.get(host, {})
        rule = _scheme_rule(host, rests, self.min_support)
        if rule is not None:
            self._scheme_rules[host] = rule
        else:
            self._scheme_rules.pop(host, None)
        shared: dict[str, int] = {}   # partner -> paths in one cluster with this host (a bound)
        for rest, by_scheme in rests.items():
            for c in {c for c, _ in by_scheme.values()}:
                for other in islice(self._rest_hosts.get((rest, c), ()), MAX_ALIAS_PARTNERS):
                    if other != host:
                        shared[other] = shared.get(other, 0) + 1
        candidates = {h for h, n in shared.items() if n >= self.min_support} | self._partners.get(host, set())
        for other in candidates:
            pair = _alias_pair(host, other)
            rule = _pair_rule(self._alias_pages, *pair, self.min_support)
            if rule is not None:
                self._pair_rules[pair] = rule
                self._partners.setdefault(host, set()).add(other)
                self._partners.setdefault(other, set()).add(host)
            else:
                self._pair_rules.pop(pair, None)
                self._partners.get(host, set()).discard(other)
                self._partners.get(other, set()).discard(host)
        self._alias_at[host], self._alias_changes[host] = len(rests), 0

    def _host_alias_rules(self, host: str) -> list[Rule]:
        out = [self._pair_rules[_alias_pair(host, other)] for other in sorted(self._partners.get(host, ()))]
        if host in self._scheme_rules:
            out.append(self._scheme_rules[host])
        return sorted(out, key=lambda r: (-r.support, r.name))

    def alias_rules(self, host: str | None = None) -> list[Rule]:
        """The ``scheme-alias`` and ``host-alias`` rules of ``host`` (every host when None;
        each once, sorted by :attr:`Rule.host` then support).

        >>> learner = RuleLearner(min_support=2)
        >>> for i in range(2):
        ...     learner.observe(f"http://a.example/{i}", i)
        ...     learner.observe(f"https://a.example/{i}", i)
        >>> [r.name for r in learner.alias_rules("a.example")]
        ['scheme-alias:http=https']
        """
        hosts = [host.lower()] if host is not None else sorted(self._alias_pages)
        for h in hosts:
            self._fresh_alias(h)
        out: list[Rule] = []
        for h in hosts:
            out.extend(r for r in self._host_alias_rules(h) if host is not None or r.host == h)
        return out

    def _alias_variants(self, url: str) -> list[tuple[str, str]]:
        """The URLs the alias rules make equal to ``url`` (same scheme first), each with the
        name of the rule."""
        o = _origin(url)
        if o is None:
            return []
        scheme, host, rest = o
        self._fresh_alias(host)
        flip = "https" if scheme == "http" else "http"
        out: list[tuple[str, str]] = []
        for rule in self._host_alias_rules(host):
            if rule.kind == "scheme-alias":
                out.append((url_at(flip, host, rest), rule.name))
            else:
                a, b = rule.hosts
                target = b if a == host else a
                out.append((url_at(scheme, target, rest), rule.name))
                out.append((url_at(flip, target, rest), rule.name))
        return out

    def rules(self, host: str | None = None) -> list[Rule]:
        """The rules of ``host`` (every host when None), strongest first: its URL rules,
        then its alias rules (an alias rule of two hosts is listed under both; once, under
        its :attr:`Rule.host`, in the list of every host)."""
        hosts = [host.lower()] if host is not None else sorted(set(self._obs) | set(self._alias_pages))
        for h in hosts:
            self._fresh(h)
            self._fresh_alias(h)
        out: list[Rule] = []
        for h in hosts:
            out.extend(self._rules.get(h, []))
            out.extend(r for r in self._host_alias_rules(h) if host is not None or r.host == h)
        return out

    def match(self, url: str) -> RuleMatch | None:
        """The known page the rules map ``url`` to (None when no rule applies, or the
        rewritten URL is not known, or it is ``url`` itself): first the URL rules of its
        host, then its alias rules, each followed by the URL rules of the alias host."""
        host = origin_of(url)
        if host not in self._obs:
            return None
        self._fresh(host)
        rules = self._rules.get(host)
        if rules:
            key, fired = normalize(url, frozenset(r.name for r in rules))
            known = self._keys[host].get(key)
            if known is not None and known != url and fired and known in self._obs[host]:
                return RuleMatch(url, known, self._obs[host][known], fired)
        for variant, name in self._alias_variants(url):
            target = origin_of(variant)
            pages = self._obs.get(target)
            if not pages:
                continue
            self._fresh(target)
            key, fired = normalize(variant, frozenset(r.name for r in self._rules.get(target, [])))
            known = self._keys[target].get(key)
            if known is not None and known != url and known in pages:
                return RuleMatch(url, known, pages[known], (name, *fired))
        return None
