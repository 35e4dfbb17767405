"""Extraction quality and CPU cost on every gold set of the shared corpus.

For each gold set with full gold text (scrapinghub-aeb, cleaneval, dragnet, l3s-gn1, readability,
cleanportaleval, utomo big9 and chaos) this measures, on the same pages in one interleaved run
(every page goes through every method in a rotating order, CPU time by ``time.process_time``):

* mean word F1 against the gold text (bag of words, case-folded, ``\\w+`` tokens);
* CPU milliseconds per page from raw bytes to extracted text (mean, p99, max);

for ``hybrid`` (neardup's new fast main-content path with its trafilatura fallback), neardup's
``accurate`` (trafilatura) and ``fast`` (Resiliparse) extractors, trafilatura alone, Resiliparse
alone and readability-lxml. For ``hybrid`` it also counts the pages that fell back to trafilatura
and what they cost. The trafilatura set has no full gold text: it is scored separately by the
share of its "with" snippets found and "without" snippets absent.

Usage::

    python benchmarks/extraction.py [--corpus PATH] [--limit N] [--jobs N] [--out docs/extraction.md]

``--limit`` takes the first N pages of each set (development runs); ``--out`` writes the report
and the section of docs/benchmarks.md. Progress goes to stderr, a JSON summary to stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing import Pool
from pathlib import Path
from typing import Any, cast

from _common import CORPUS, DOC, loadavg, machine, replace_section, table
from _corpus import read_page, read_tsv

DEFAULT_CORPUS = CORPUS
METHODS = ("hybrid", "accurate", "fast", "trafilatura", "resiliparse", "readability")
GOLD_SETS = ("scrapinghub-aeb", "cleaneval", "dragnet", "l3s-gn1", "readability", "cleanportaleval",
             "utomo-big9", "utomo-chaos")
_WORD = re.compile(r"\w+")
_CLEANEVAL_MARK = re.compile(r"^\s*<(?:p|h|l)>\s*", re.MULTILINE)
_DRAGNET_COMMENTS = "!@#$%^&*()  COMMENTS"


@dataclass(frozen=True)
class GoldPage:
    """One page of a gold set: where its HTML is and its gold text (or snippets)."""

    gold_set: str
    name: str
    path: Path
    url: str | None
    gold: str
    with_snippets: tuple[str, ...] = ()
    without_snippets: tuple[str, ...] = ()


def _read_text(path: Path) -> str:
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as fh:
            return fh.read()
    return path.read_text(encoding="utf-8", errors="replace")


def _cleaneval_text(text: str) -> str:
    """CleanEval gold: the ``URL:`` line and the ``<p>``/``<h>``/``<l>`` markers removed."""
    lines = text.splitlines()
    if lines and lines[0].startswith("URL:"):
        lines = lines[1:]
    import html
    return html.unescape(_CLEANEVAL_MARK.sub("", "\n".join(lines)))


def _html_text(markup: str, selector: str | None = None) -> str:
    """Text of an HTML fragment (or of the elements matching an XPath ``selector``)."""
    import lxml.html
    tree = lxml.html.fromstring(markup)
    if selector is None:
        return tree.text_content()
    return "\n".join(el.text_content() for el in tree.xpath(selector))


def load_gold_sets(corpus: Path, limit: int | None = None) -> dict[str, list[GoldPage]]:
    """Every gold set of ``corpus`` that is present, as lists of pages with gold text.

    >>> sets = load_gold_sets(DEFAULT_CORPUS, limit=2)  # doctest: +SKIP
    >>> sorted(sets)[:2]  # doctest: +SKIP
    ['cleaneval', 'cleanportaleval']
    """
    out: dict[str, list[GoldPage]] = {}

    def room(name: str) -> bool:
        return limit is None or len(out.get(name, ())) < limit

    def add(name: str, page: GoldPage) -> None:
        if room(name):
            out.setdefault(name, []).append(page)

    base = corpus / "scrapinghub-aeb"
    if (base / "manifest.tsv").exists():
        truth = json.loads((base / "ground-truth.json").read_text(encoding="utf-8"))
        for row in read_tsv(base / "manifest.tsv"):
            key = Path(row["file"]).name.removesuffix(".html.gz")
            add("scrapinghub-aeb", GoldPage("scrapinghub-aeb", key, base / row["file"], row["url"] or None,
                                            truth[key]["articleBody"]))
    for name, gold_of in (("cleaneval", _cleaneval_text), ("cleanportaleval", _cleaneval_text)):
        base = corpus / name
        if (base / "manifest.tsv").exists():
            for row in read_tsv(base / "manifest.tsv"):
                if row["gold"] and room(name):
                    url = row.get("url") or row.get("url_from_html") or None
                    gold = gold_of(_read_text(base / row["gold"]))
                    add(name, GoldPage(name, row["file"], base / row["file"], url, gold))
    base = corpus / "dragnet"
    if (base / "manifest.tsv").exists():
        for row in read_tsv(base / "manifest.tsv"):
            if not room("dragnet"):
                break
            gold = _read_text(base / row["gold"]).split(_DRAGNET_COMMENTS)[0]
            add("dragnet", GoldPage("dragnet", row["file"], base / row["file"], row["url_from_html"] or None, gold))
    base = corpus / "l3s-gn1"
    if (base / "manifest.tsv").exists():
        for row in read_tsv(base / "manifest.tsv"):
            if not room("l3s-gn1"):
                break
            annotated = _read_text(base / row["annotated"])
            gold = _html_text(annotated, '//span[contains(@class, "x-nc-sel1") or contains(@class, "x-nc-sel2") '
                                         'or contains(@class, "x-nc-sel3")]')
            add("l3s-gn1", GoldPage("l3s-gn1", row["file"], base / row["file"], row["url"] or None, gold))
    base = corpus / "readability"
    if (base / "manifest.tsv").exists():
        for row in read_tsv(base / "manifest.tsv"):
            if row["synthetic_or_tiny"] == "yes" or not room("readability"):
                continue
            folder = base / row["dir"]
            gold = _html_text((folder / "expected.html").read_text(encoding="utf-8"))
            add("readability", GoldPage("readability", row["dir"], folder / "source.html.gz",
                                        row["url_from_html"] or None, gold))
    base = corpus / "utomo-news-extraction"
    if (base / "manifest.tsv").exists():
        for row in read_tsv(base / "manifest.tsv"):
            name = f"utomo-{row['set']}"
            if not room(name):
                continue
            add(name, GoldPage(name, row["file"], base / row["file"], row["url_from_html"] or None,
                               _read_text(base / row["gold"])))
    base = corpus / "trafilatura"
    if (base / "evaldata.json").exists():
        evaldata = json.loads((base / "evaldata.json").read_text(encoding="utf-8"))
        for url, entry in evaldata.items():
            path = base / (entry["file"] + ".gz")
            if not path.exists():
                path = base / "eval" / (entry["file"] + ".gz")
            if path.exists():
                add("trafilatura", GoldPage("trafilatura", entry["file"], path, url, "",
                                            tuple(entry.get("with") or ()), tuple(entry.get("without") or ())))
    return {k: v for k, v in out.items() if v}


def words(text: str) -> Counter[str]:
    """Bag of case-folded words.

    >>> sorted(words("The cat, the HAT").items())
    [('cat', 1), ('hat', 1), ('the', 2)]
    """
    return Counter(_WORD.findall(text.casefold()))


def word_f1(predicted: str, gold: str) -> float:
    """Bag-of-words F1 of ``predicted`` against ``gold`` (1.0 when both are empty).

    >>> round(word_f1("a b c", "a b d"), 3)
    0.667
    """
    p, g = words(predicted), words(gold)
    if not p and not g:
        return 1.0
    overlap = sum((p & g).values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / sum(p.values()), overlap / sum(g.values())
    return 2 * precision * recall / (precision + recall)


def snippet_score(text: str, with_snippets: Sequence[str], without_snippets: Sequence[str]) -> float:
    """Share of the trafilatura eval snippets handled right: "with" found, "without" absent
    (whitespace-normalised, case-folded)."""
    norm = " ".join(text.split()).casefold()
    checks = [" ".join(s.split()).casefold() in norm for s in with_snippets]
    checks += [" ".join(s.split()).casefold() not in norm for s in without_snippets]
    return sum(checks) / len(checks) if checks else 1.0


# --- the methods: raw page bytes -> text ---------------------------------------------------

def _neardup(extractor: str) -> Callable[[bytes, str | None], tuple[str, str | None]]:
    from neardup.fingerprint.extract import extract_main_content

    def run(data: bytes, url: str | None) -> tuple[str, str | None]:
        page = extract_main_content(data, url, extractor=extractor)
        return page.text, getattr(page, "path", None)
    return run


def _trafilatura(data: bytes, url: str | None) -> tuple[str, str | None]:
    import trafilatura
    return trafilatura.extract(data, url=url) or "", None


def _resiliparse(data: bytes, url: str | None) -> tuple[str, str | None]:
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding
    from resiliparse.parse.html import HTMLTree
    # detect_encoding is typed str | None; it falls back to a guess (bytes_to_str would reject None)
    tree = HTMLTree.parse(bytes_to_str(data, cast(str, detect_encoding(data))))
    return extract_plain_text(tree, main_content=True), None


def _readability(data: bytes, url: str | None) -> tuple[str, str | None]:
    import lxml.html
    from readability import Document
    summary = Document(data, url=url).summary(html_partial=True)
    return lxml.html.fromstring(summary).text_content() if summary.strip() else "", None


def method_functions() -> dict[str, Callable[[bytes, str | None], tuple[str, str | None]]]:
    """Each compared method as ``f(page bytes, url) -> (text, path taken or None)``."""
    return {"hybrid": _neardup("hybrid"), "accurate": _neardup("accurate"), "fast": _neardup("fast"),
            "trafilatura": _trafilatura, "resiliparse": _resiliparse, "readability": _readability}


_FUNCS: dict[str, Callable[[bytes, str | None], tuple[str, str | None]]] = {}


def _init_worker(methods: Sequence[str]) -> None:
    import logging
    logging.disable(logging.CRITICAL)  # trafilatura and readability log every odd page
    funcs = method_functions()
    _FUNCS.clear()
    _FUNCS.update({m: funcs[m] for m in methods})
    # warm up: first-call imports and lazy initialisations are not a page's cost
    warm = b"<html><head><title>t</title></head><body><article><p>" + b"word " * 50 + b"</p></article></body></html>"
    for f in _FUNCS.values():
        with contextlib.suppress(Exception):
            f(warm, None)


def _run_page(job: tuple[int, GoldPage]) -> dict[str, Any]:
    index, page = job
    data = read_page(page.path)
    names = list(_FUNCS)
    shift = index % len(names)
    result: dict[str, Any] = {"set": page.gold_set, "name": page.name, "bytes": len(data)}
    for name in names[shift:] + names[:shift]:  # rotating order: no method always runs first
        t0 = time.process_time()
        try:
            text, path = _FUNCS[name](data, page.url)
            error = None
        except Exception as exc:  # noqa: BLE001 - a method failing on a page scores 0 there
            text, path, error = "", None, f"{type(exc).__name__}: {str(exc)[:100]}"
        cpu = time.process_time() - t0
        if page.gold_set == "trafilatura":
            score = snippet_score(text, page.with_snippets, page.without_snippets)
        else:
            score = word_f1(text, page.gold)
        result[name] = {"f1": score, "cpu": cpu, "path": path, "error": error}
    return result


def run(corpus: Path, methods: Sequence[str], limit: int | None, jobs: int,
        sets: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Every method on every page of every gold set (``jobs`` processes)."""
    gold = load_gold_sets(corpus, limit)
    pages = [p for name, ps in gold.items() if not sets or name in sets for p in ps]
    jobs_list = list(enumerate(pages))
    results: list[dict[str, Any]] = []
    with Pool(jobs, initializer=_init_worker, initargs=(list(methods),), maxtasksperchild=200) as pool:
        for i, r in enumerate(pool.imap_unordered(_run_page, jobs_list, chunksize=4), 1):
            results.append(r)
            if i % 100 == 0:
                print(f"{i}/{len(pages)} pages", file=sys.stderr, flush=True)
    return results


def _p99(values: Sequence[float]) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(0.99 * len(s)))] if s else float("nan")


def summarise(results: Sequence[dict[str, Any]], methods: Sequence[str]) -> dict[str, Any]:
    """Per gold set and method: pages, mean F1 (or snippet score), CPU ms mean / p99 / max."""
    summary: dict[str, Any] = {}
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault(r["set"], []).append(r)
    groups["all"] = list(results)
    for name, rows in groups.items():
        entry: dict[str, Any] = {"pages": len(rows)}
        for m in methods:
            cpu = [r[m]["cpu"] * 1000 for r in rows]
            entry[m] = {"f1": sum(r[m]["f1"] for r in rows) / len(rows), "cpu_mean": sum(cpu) / len(cpu),
                        "cpu_p99": _p99(cpu), "cpu_max": max(cpu),
                        "errors": sum(1 for r in rows if r[m]["error"])}
        if "hybrid" in methods:
            paths = Counter((r["hybrid"]["path"] or "none").split(":")[0].split(" (")[0] for r in rows)
            fell = [r for r in rows if (r["hybrid"]["path"] or "").startswith("fallback")]
            entry["paths"] = dict(paths)
            entry["fallback_share"] = len(fell) / len(rows)
            entry["fallback_cpu_share"] = (sum(r["hybrid"]["cpu"] for r in fell)
                                           / max(1e-9, sum(r["hybrid"]["cpu"] for r in rows)))
        summary[name] = entry
    return summary


def machine_description() -> dict[str, Any]:
    """:func:`_common.machine` (CPU count and model, Python, the libraries compared) with the
    load average."""
    return {**machine(("resiliparse", "trafilatura", "readability-lxml", "lxml")), "load": loadavg()}


def report(summary: dict[str, Any], methods: Sequence[str], command: str, machine: dict[str, str],
           load_after: str, worst: Sequence[dict[str, Any]]) -> list[str]:
    """The Markdown tables of the run."""
    lines = [f"Command: `{command}`", "",
             f"Machine: {machine['nproc']} CPUs ({machine['cpu']}), Python {machine['python']}, "
             f"{machine['libraries']}; load average before {machine['load']}, after {load_after} "
             "(the machine is shared: CPU time, not wall time, is measured).", ""]
    header = ["gold set", "pages"] + [f"{m} F1" for m in methods]
    rows = []
    for name in [*GOLD_SETS, "trafilatura", "all"]:
        if name in summary:
            e = summary[name]
            rows.append([name, e["pages"]] + [f"{e[m]['f1']:.3f}" for m in methods])
    lines += ["Mean word F1 against the gold text (trafilatura: share of with/without snippets right):", ""]
    lines += table(header, rows)
    lines += ["", "CPU milliseconds per page, raw bytes to text (mean / p99 / max):", ""]
    rows = []
    for name in [*GOLD_SETS, "trafilatura", "all"]:
        if name in summary:
            e = summary[name]
            rows.append([name] + [f"{e[m]['cpu_mean']:.1f} / {e[m]['cpu_p99']:.0f} / {e[m]['cpu_max']:.0f}"
                                  for m in methods])
    lines += table(["gold set"] + list(methods), rows)
    if "hybrid" in methods and "trafilatura" in methods:
        a = summary["all"]
        lines += ["", f"hybrid / trafilatura CPU: {a['hybrid']['cpu_mean'] / a['trafilatura']['cpu_mean']:.3f}; "
                      f"pages that fell back to trafilatura: {a['fallback_share']:.1%} "
                      f"({a['fallback_cpu_share']:.1%} of hybrid's CPU). Paths taken: "
                      + ", ".join(f"{k}: {v}" for k, v in sorted(a["paths"].items(), key=lambda kv: -kv[1])) + "."]
    if worst:
        lines += ["", "Slowest pages for hybrid (CPU ms): "
                  + ", ".join(f"{w['set']}/{w['name']} {w['hybrid']['cpu'] * 1000:.0f} ({w['hybrid']['path']})"
                              for w in worst) + "."]
    return lines


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--limit", type=int, default=None, help="at most N pages per gold set")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--sets", default="", help="comma-separated gold sets (default: all)")
    parser.add_argument("--out", type=Path, default=None, help="write this report (e.g. docs/extraction.md)")
    parser.add_argument("--dump", type=Path, default=None, help="per-page results as JSON lines")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print a JSON summary."""
    args = parse_args(argv)
    methods = [m for m in args.methods.split(",") if m]
    machine = machine_description()
    results = run(args.corpus, methods, args.limit, args.jobs, [s for s in args.sets.split(",") if s])
    if not results:
        print(f"no gold set found under {args.corpus}", file=sys.stderr)
        return 2
    summary = summarise(results, methods)
    load_after = loadavg()
    worst = sorted(results, key=lambda r: -r["hybrid"]["cpu"])[:5] if "hybrid" in methods else []
    command = "python benchmarks/extraction.py " + " ".join(argv if argv is not None else sys.argv[1:])
    lines = report(summary, methods, command, machine, load_after, worst)
    print("\n".join(lines), file=sys.stderr)
    if args.dump:
        args.dump.write_text("\n".join(json.dumps(r) for r in results) + "\n", encoding="utf-8")
    if args.out:
        write_docs(args.out, lines)
    print(json.dumps({k: {m: v[m] for m in methods} | {"pages": v["pages"]} for k, v in summary.items()}))
    return 0


def write_docs(out: Path, lines: Sequence[str]) -> None:
    """The full report in ``out`` (between markers, the prose around it kept) and the same
    tables in the extraction section of docs/benchmarks.md."""
    start, end = "<!-- extraction-benchmark:start -->", "<!-- extraction-benchmark:end -->"
    block = "\n".join([start, *lines, end])
    replace_section(out, start, end, block)
    replace_section(DOC, start, end,
                    "\n".join([start, "## Extraction: quality and CPU per page (benchmarks/extraction.py)", "",
                               "Details and method: docs/extraction.md.", "", *lines, end]))


if __name__ == "__main__":
    raise SystemExit(main())
