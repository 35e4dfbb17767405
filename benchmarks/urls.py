"""URL normalisation: the library comparison table and the cost of ``neardup.urls.normalize_url``.

    python benchmarks/urls.py --table     # the edge-case table of docs/urls.md (Markdown)
    python benchmarks/urls.py             # microseconds per URL on real URLs and variants
    python benchmarks/urls.py --learner   # RuleLearner.observe (+ a match every 3rd URL) per URL

The URLs: every http(s) URL named in the manifests and metadata of ``shared/corpus``
(``../shared/corpus`` from the repository, or ``--corpus DIR``; 4,731 distinct URLs of
~2,600 hosts) and ``examples/sample/urls.tsv``, each also written in 7 generated variants
(upper-case host, explicit default port, a fragment, tracking parameters, dot segments,
percent-encoded unreserved characters, ``www.`` added or removed). ``normalize_url`` is
timed cold (a new process's first pass: the IDNA host cache empty) and warm (best of
``--repeat`` passes, the hosts cached as in a crawl); w3lib's ``canonicalize_url``,
courlan's ``normalize_url`` and ``url_normalize`` are timed warm for reference.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import re
import time
from collections.abc import Callable
from pathlib import Path

from _common import CORPUS, REPO_ROOT
from _corpus import read_tsv

from neardup.errors import URLError
from neardup.urls import _host, normalize_url

_URL = re.compile(r"https?://[^\s\"'<>)\]\\]+")

#: (case, URL): the edge cases of the table in docs/urls.md
CASES = [
    ("case of scheme and host", "HTTP://Example.COM/a"),
    ("empty path", "http://example.com"),
    ("default port http", "http://example.com:80/"),
    ("default port https", "https://example.com:443/x"),
    ("other port", "http://example.com:8080/"),
    ("fragment", "http://example.com/a#frag"),
    ("hash-bang fragment", "http://example.com/#!/page"),
    ("IDN host", "http://bücher.de/"),
    ("punycode host", "http://xn--bcher-kva.de/"),
    ("IDNA 2008 (ß)", "http://faß.de/"),
    ("host with trailing dot", "http://example.com./"),
    ("IPv6 host, default port", "http://[2001:DB8::1]:80/"),
    ("escaped unreserved", "http://example.com/%7efoo"),
    ("escaped reserved, lower-case hex", "http://example.com/a%2fb"),
    ("dot segments", "http://example.com/a/./b/../c"),
    ("empty segments", "http://example.com/foo//bar"),
    ("non-ASCII path", "http://example.com/ä"),
    ("Latin-1 escape (no UTF-8)", "http://example.com/?q=M%FCller"),
    ("parameter order", "http://example.com/?b=2&a=1"),
    ("tracking parameter", "http://example.com/?a=1&utm_source=x"),
    ("content parameters ref, id", "http://example.com/?id=5&ref=x"),
    ("parameter without value", "http://example.com/?a&b="),
    ("space as + and %20", "http://example.com/?a=b%20c"),
    ("user info", "http://user:Pass@Example.com/"),
    ("empty query", "http://example.com/a?"),
]


def libraries() -> dict[str, Callable[[str], str]]:
    """The normalisers compared: neardup's key and the three libraries (those installed)."""
    out: dict[str, Callable[[str], str]] = {"neardup `normalize_url`": normalize_url}
    try:
        from w3lib.url import canonicalize_url
        out["w3lib `canonicalize_url`"] = canonicalize_url
    except ImportError:
        pass
    try:
        from courlan import normalize_url as courlan_normalize
        out["courlan `normalize_url`"] = courlan_normalize
    except ImportError:
        pass
    try:
        from url_normalize import url_normalize
        out["`url_normalize`"] = lambda u: url_normalize(u) or ""
    except ImportError:
        pass
    return out


def table() -> str:
    libs = libraries()
    rows = ["| case | input | " + " | ".join(libs) + " |", "|---" * (len(libs) + 2) + "|"]
    for name, url in CASES:
        cells = []
        for fn in libs.values():
            try:
                out = fn(url)
            except Exception as exc:  # noqa: BLE001 - a library's failure is a cell of the table
                out = f"error: {type(exc).__name__}"
            cells.append("=" if out == url else f"`{out}`")
        rows.append(f"| {name} | `{url}` | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def corpus_urls(corpus: Path | None) -> list[str]:
    found: set[str] = set()
    if corpus is not None and corpus.is_dir():
        for path in sorted(corpus.glob("*/*")):
            if path.is_file() and path.suffix in (".tsv", ".json", ".txt", ".md") and path.stat().st_size < 5 << 20:
                text = path.read_text(encoding="utf-8", errors="replace")
                found.update(u.rstrip(".,;:") for u in _URL.findall(text))
    found.update(row["url"] for row in read_tsv(REPO_ROOT / "examples" / "sample" / "urls.tsv"))
    return sorted(found)


def variants(url: str, rng: random.Random) -> list[str]:
    scheme, _, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    path = slash + path
    port = ":443" if scheme == "https" else ":80"
    www = host[4:] if host.startswith("www.") else "www." + host
    return [
        f"{scheme.upper()}://{host.upper()}{path}",
        f"{scheme}://{host}{port}{path}",
        f"{url}#section-{rng.randint(1, 9)}",
        url + ("&" if "?" in url else "?") + "utm_source=feed&utm_medium=rss&fbclid=" + str(rng.getrandbits(40)),
        f"{scheme}://{host}/./x/..{path or '/'}",
        f"{scheme}://{host}{path.replace('-', '%2D').replace('.', '%2E')}",
        f"{scheme}://{www}{path}",
    ]


def timed(fn: Callable[[str], object], urls: list[str], repeat: int) -> tuple[float, float, int]:
    """(first pass, best pass) in microseconds per URL, and the URLs it rejected."""
    passes, rejected = [], 0
    for i in range(repeat):
        t = time.perf_counter()
        for u in urls:
            try:
                fn(u)
            except (URLError, ValueError):
                rejected += i == 0
        passes.append((time.perf_counter() - t) / len(urls) * 1e6)
    return passes[0], min(passes), rejected


def learner_cost(real: list[str], rng: random.Random) -> dict[str, object]:
    """Microseconds per observed page of a RuleLearner fed the keys of the real URLs (each its
    own cluster) and, for 2,000 of them, the same page on the ``www.``-toggled host, with a
    ``match`` of the http:// form every third page (the learned rules' count too)."""
    from neardup.crawl.urlrules import RuleLearner

    keys = [normalize_url(u) for u in real]
    obs = [(k, i) for i, k in enumerate(keys)]
    for i, k in enumerate(keys[:2000]):
        scheme, _, rest = k.partition("://")
        obs.append((f"{scheme}://{rest[4:] if rest.startswith('www.') else 'www.' + rest}", i))
    rng.shuffle(obs)
    learner = RuleLearner()
    t = time.perf_counter()
    for n, (url, cluster) in enumerate(obs):
        learner.observe(url, cluster)
        if n % 3 == 0:
            learner.match(url.replace("https://", "http://", 1))
    us = (time.perf_counter() - t) / len(obs) * 1e6
    rules = learner.rules()
    return {"pages": len(obs), "us_per_page": round(us, 1), "rules": len(rules),
            "alias_rules": sum(r.kind in ("host-alias", "scheme-alias") for r in rules)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--table", action="store_true", help="print the edge-case table (Markdown) and stop")
    ap.add_argument("--corpus", type=Path, default=None, help="shared/corpus (default: found beside the repository)")
    ap.add_argument("--learner", action="store_true",
                    help="time RuleLearner.observe and match on the keys of the real URLs and their www. aliases")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.table:
        print(table())
        return
    corpus = args.corpus or CORPUS
    real = corpus_urls(corpus)
    rng = random.Random(args.seed)
    if args.learner:
        print(json.dumps(learner_cost(real, rng), indent=1))
        return
    urls = real + [v for u in real for v in variants(u, rng)]
    rng.shuffle(urls)
    keys = {normalize_url(u) for u in real}
    result: dict[str, object] = {
        "real_urls": len(real), "urls": len(urls), "hosts": len({u.split("/")[2].lower() for u in real}),
        "distinct_keys_of_real": len(keys), "distinct_keys_all": len({normalize_url(u) for u in urls}),
        "python": platform.python_version(), "machine": platform.processor() or platform.machine(),
    }
    _host.cache_clear()
    first, best, _ = timed(normalize_url, real, args.repeat)
    result["neardup `normalize_url`, real URLs only"] = {"us_per_url_first_pass": round(first, 2),
                                                          "us_per_url_best": round(best, 2)}
    _host.cache_clear()
    for name, fn in libraries().items():
        first, best, rejected = timed(fn, urls, args.repeat)
        result[name] = {"us_per_url_first_pass": round(first, 2), "us_per_url_best": round(best, 2),
                        "rejected": rejected}
    print(json.dumps(result, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
