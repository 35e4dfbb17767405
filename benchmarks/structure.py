"""Structure fingerprints on real pages (issue 23): cost, distances, templates, redesigns, ensemble.

Writes the section "Structure fingerprints" of docs/quality.md (between its markers; the
rest of the file stays as it is):

* cost: the structure SimHash of an already parsed tree against the page's whole
  fingerprint cost (``neardup.fingerprint`` from raw bytes) with each extractor available;
* distances: Big9 (within one site and year, across years of one site, across sites),
  CleanPortalEval (within a site, across sites), postlight-fixtures (one host within a
  capture era, one host across eras (2016-2021 against 2022), different hosts);
* templates: how :func:`neardup.crawl.templates.templates` groups pages at each threshold (pure
  groups, templates per site-year, CleanPortalEval sites on one template);
* redesigns: each Big9 site's 40 pages in time order (shuffled within a year), each site-year
  alone, postlight hosts in capture order;
* ensemble: the structure distance of same-host pairs with little text (the
  repeated-boilerplate guard's cases) by label, with the ``accurate`` extractor.

Run: ``PYTHONPATH=src python benchmarks/structure.py [--corpus ../shared/corpus] [--out docs/quality.md]``
(``--no-ensemble`` skips the extraction of 1,341 pages, ``--cache DIR`` keeps the texts).
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import random
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

# _common puts NEARDUP_SRC first on sys.path when it is set: another checkout's src (e.g. the
# extractor branch, for its "hybrid" extractor); else this checkout's
from _common import CORPUS, logger, replace_section, table
from _corpus import load_pairs, page_locations, read_page, read_tsv
from resiliparse.parse.html import HTMLTree

from neardup import fingerprint
from neardup.crawl.templates import (
    MAX_CHANCE,
    MIN_PAGES,
    REDESIGN_WINDOW,
    TEMPLATE_DISTANCE,
    TemplatePage,
    redesigns,
    templates,
)
from neardup.fingerprint.core import FingerprintConfig
from neardup.fingerprint.extract import EXTRACTORS, decode
from neardup.fingerprint.structure import structure_distance, structure_of, structure_simhash

BEGIN = "<!-- structure.py: begin -->"
END = "<!-- structure.py: end -->"
BIG9 = "utomo-news-extraction"
SEEDS = (1, 2, 3, 4, 5)
THRESHOLDS = (6, 8, 10, 12, 14, 16, 18, 20)


def tree_of(data: bytes) -> HTMLTree:
    text, _ = decode(data)
    return HTMLTree.parse(text)


def big9(corpus: Path) -> list[dict[str, Any]]:
    rows = [r for r in read_tsv(corpus / BIG9 / "manifest.tsv") if r["set"] == "big9"]
    return [{"file": f"{BIG9}/{r['file']}", "site": r["site"], "year": int(r["year"])} for r in rows]


def cleanportaleval(corpus: Path) -> list[dict[str, Any]]:
    rows = read_tsv(corpus / "cleanportaleval" / "manifest.tsv")
    # the two washingtonpost.com blog groups are one site (one template)
    return [{"file": f"cleanportaleval/{r['file']}", "site": r["site_group"].split("_blog")[0]} for r in rows]


def postlight(corpus: Path) -> list[dict[str, Any]]:
    rows = read_tsv(corpus / "postlight-fixtures" / "manifest.tsv")
    return [{"file": f"postlight-fixtures/{r['file']}", "site": r["host"] or r["fixture_domain"],
             "date": r["first_commit_date"]} for r in rows]


def q(values: Sequence[float]) -> list[str]:
    """n, min, p5, median, p95, max."""
    if not values:
        return ["0", "", "", "", "", ""]
    p = np.percentile(values, [0, 5, 50, 95, 100])
    return [f"{len(values):,}"] + [f"{x:.0f}" for x in p]


# --------------------------------------------------------------------------------------------
# cost
# --------------------------------------------------------------------------------------------

def cost(corpus: Path, pages: list[str], log: Callable[[str], None]) -> dict[str, Any]:
    structure_of(b"<p>warm up</p>")
    extractors = [e for e in ("fast", "hybrid", "accurate") if e in EXTRACTORS]
    configs = {e: FingerprintConfig(extractor=e) for e in extractors}
    totals: dict[str, float] = defaultdict(float)
    ratios: dict[str, list[float]] = defaultdict(list)
    per_page: dict[str, list[float]] = defaultdict(list)
    for n, page in enumerate(pages, 1):
        data = read_page(corpus / page)
        t0 = time.process_time()
        tree = tree_of(data)
        t1 = time.process_time()
        structure_simhash(tree)
        t2 = time.process_time()
        structure_of(data)
        t3 = time.process_time()
        assert tree.document is not None
        tree.document.html  # noqa: B018 (Lexbor's serialisation alone: the part of the structure no pass can cut)
        t4 = time.process_time()
        took = {"parse": t1 - t0, "structure": t2 - t1, "structure_of": t3 - t2, "serialise": t4 - t3}
        for e in extractors:
            s = time.process_time()
            fingerprint(data, config=configs[e])
            took[e] = time.process_time() - s
        for key, value in took.items():
            totals[key] += value
            per_page[key].append(value)
        for e in extractors:
            ratios[e].append(took["structure"] / took[e] if took[e] > 0 else 0.0)
        if n % 50 == 0:
            log(f"cost: {n}/{len(pages)} pages")
    return {"extractors": extractors, "totals": dict(totals), "ratios": dict(ratios),
            "per_page": dict(per_page), "pages": len(pages)}


# --------------------------------------------------------------------------------------------
# distances, templates, redesigns
# --------------------------------------------------------------------------------------------

def structures(corpus: Path, rows: list[dict[str, Any]]) -> None:
    for r in rows:
        r["structure"] = structure_simhash(tree_of(read_page(corpus / r["file"])))


def pair_distances(rows: list[dict[str, Any]], kind: Callable[[dict[str, Any], dict[str, Any]], str | None]
                   ) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for a, b in itertools.combinations(rows, 2):
        k = kind(a, b)
        if k is not None:
            out[k].append(structure_distance(a["structure"], b["structure"]))
    return out


def big9_kind(a: dict[str, Any], b: dict[str, Any]) -> str:
    if a["site"] != b["site"]:
        return "across sites"
    return "within site-year" if a["year"] == b["year"] else "across years of a site"


def site_kind(a: dict[str, Any], b: dict[str, Any]) -> str:
    return "within site" if a["site"] == b["site"] else "across sites"


def era(date: str) -> str:
    return "2022" if date >= "2022" else "2016-2021"


def postlight_kind(a: dict[str, Any], b: dict[str, Any]) -> str:
    if a["site"] != b["site"]:
        return "different hosts"
    return "one host, one era" if era(a["date"]) == era(b["date"]) else "one host, across eras"


def as_pages(rows: list[dict[str, Any]], times: Sequence[float]) -> list[TemplatePage]:
    return [TemplatePage(t, r["structure"]) for r, t in zip(rows, times, strict=True)]


def template_sweep(b9: list[dict[str, Any]], cpe: list[dict[str, Any]]) -> list[list[Any]]:
    """Per threshold: Big9 (all 360 pages in time order): templates, templates holding pages of
    more than one site, site-years on one template / on at most 2; CleanPortalEval: sites on
    one template, share of the largest template (mean over sites)."""
    rows = []
    ordered = sorted(b9, key=lambda r: (r["year"], r["file"]))
    for t in THRESHOLDS:
        from neardup.crawl.templates import assign

        _, ids, state = assign(as_pages(ordered, [float(i) for i in range(len(ordered))]), t)
        members: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for r, i in zip(ordered, ids, strict=True):
            members[i].append(r)
        impure = sum(1 for m in members.values() if len({r["site"] for r in m}) > 1)
        per_site_year: Counter[tuple[str, int]] = Counter()
        for m in members.values():
            for key in {(r["site"], r["year"]) for r in m}:
                per_site_year[key] += 1
        one = sum(1 for v in per_site_year.values() if v == 1)
        two = sum(1 for v in per_site_year.values() if v <= 2)
        cpe_one = 0
        cpe_top = []
        sites = sorted({r["site"] for r in cpe})
        for s in sites:
            pages = [r for r in cpe if r["site"] == s]
            ts = templates(as_pages(pages, [float(i) for i in range(len(pages))]), t)
            cpe_one += len(ts) == 1
            cpe_top.append(ts[0]["share"])
        rows.append([t, len(members), impure, f"{one} / {len(per_site_year)}", f"{two} / {len(per_site_year)}",
                     f"{cpe_one} / {len(sites)}", f"{statistics.mean(cpe_top):.2f}"])
    return rows


def big9_redesigns(b9: list[dict[str, Any]]) -> dict[str, Any]:
    """Each site in time order (years ascending, shuffled within a year): redesign events
    found at the three year boundaries, elsewhere; each site-year alone: events."""
    sites = sorted({r["site"] for r in b9})
    found = wrong = missed = alone = drawn_events = online_found = online_wrong = online_drawn = 0
    detail: dict[str, list[str]] = defaultdict(list)
    for seed in SEEDS:
        rnd = random.Random(seed)
        for s in sites:
            pages: list[dict[str, Any]] = []
            for y in (2005, 2009, 2013, 2017):
                year = sorted((r for r in b9 if r["site"] == s and r["year"] == y), key=lambda r: r["file"])
                rnd.shuffle(year)
                pages += year
            times = [r["year"] * 1000.0 + i for i, r in enumerate(pages)]
            events = redesigns(as_pages(pages, times))
            first = {y: min(t for t, r in zip(times, pages, strict=True) if r["year"] == y) for y in (2009, 2013, 2017)}
            hits = {y for y, t in first.items() if any(e["at"] == t for e in events)}
            found += len(hits)
            missed += 3 - len(hits)
            wrong += sum(1 for e in events if e["at"] not in first.values())
            online = observed(pages, times)  # the Detector's add-time state, page by page
            online_found += len({y for y, t in first.items() if any(e["at"] == t for e in online)})
            online_wrong += sum(1 for e in online if e["at"] not in first.values())
            if seed == SEEDS[0]:
                start = {y: pages.index(next(r for r in pages if r["year"] == y)) for y in (2005, 2009, 2013, 2017)}
                detail[s] = [f"{int(e['at'] // 1000)}+{int(e['at'] % 1000) - start[int(e['at'] // 1000)]}"
                             for e in events]
            for y in (2005, 2009, 2013, 2017):
                year = [r for r in pages if r["year"] == y]
                alone += len(redesigns(as_pages(year, [float(i) for i in range(len(year))])))
                # a longer stream of one site-year: 40 of its pages drawn with replacement
                draw = random.Random(seed * 10_000 + y)
                drawn = [draw.choice(year) for _ in range(40)]
                drawn_times = [float(i) for i in range(len(drawn))]
                drawn_events += len(redesigns(as_pages(drawn, drawn_times)))
                online_drawn += len(observed(drawn, drawn_times))
    return {"found": found, "missed": missed, "wrong": wrong, "alone": alone, "runs": len(SEEDS) * len(sites),
            "site_years": len(SEEDS) * len(sites) * 4, "detail": dict(detail), "drawn": drawn_events,
            "online_found": online_found, "online_wrong": online_wrong, "online_drawn": online_drawn}


def observed(rows: list[dict[str, Any]], times: Sequence[float]) -> list[dict[str, Any]]:
    """The redesign events :class:`neardup.crawl.templates.HostStructure` reports at add time."""
    from neardup.crawl.templates import HostStructure

    state = HostStructure()
    return [e for r, t in zip(rows, times, strict=True) if (e := state.observe(t, r["structure"]).redesign)]


def cleanportaleval_redesigns(cpe: list[dict[str, Any]]) -> dict[str, int]:
    """CleanPortalEval (one template a site): redesign events of each site's pages in manifest
    order and in 5 shuffled orders, offline and at add time."""
    events = online = runs = 0
    for s in sorted({r["site"] for r in cpe}):
        rows = [r for r in cpe if r["site"] == s]
        for seed in (0, *SEEDS):
            order = rows if seed == 0 else random.Random(seed).sample(rows, len(rows))
            times = [float(i) for i in range(len(order))]
            events += len(redesigns(as_pages(order, times)))
            online += len(observed(order, times))
            runs += 1
    return {"events": events, "online": online, "runs": runs}


def postlight_redesigns(pl: list[dict[str, Any]]) -> list[list[Any]]:
    rows = []
    by_host: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in pl:
        by_host[r["site"]].append(r)
    for host, pages in sorted(by_host.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        if len(pages) < 2 * MIN_PAGES:
            continue
        pages.sort(key=lambda r: (r["date"], r["file"]))
        times = [time.mktime(time.strptime(r["date"], "%Y-%m-%d")) for r in pages]
        eras = Counter(era(r["date"]) for r in pages)
        ts = templates(as_pages(pages, times))
        events = redesigns(as_pages(pages, times))
        rows.append([f"`{host}`", len(pages), f"{eras['2016-2021']} / {eras['2022']}", len(ts),
                     ", ".join(f"{time.strftime('%Y-%m-%d', time.gmtime(e['at'] + 43200))} ({e['pages']} pages)"
                               for e in events) or "none"])
    return rows


# --------------------------------------------------------------------------------------------
# ensemble: the repeated-boilerplate guard's pairs
# --------------------------------------------------------------------------------------------

def ensemble(corpus: Path, cache: Path | None, log: Callable[[str], None]) -> dict[str, Any]:
    import quality  # benchmarks/quality.py: the same extraction and fingerprints

    from neardup.matching import GUARD_MAX_LENGTH, repeated_boilerplate

    sets = load_pairs(corpus)
    pages = sets.pages()
    hosts = {p: h for p, (_, h) in page_locations(corpus).items()}
    extraction = quality.extract_pages(corpus, pages, "accurate", cache, log, jobs=1)
    config = FingerprintConfig()
    fps = quality.fingerprint_pages(extraction.texts, config, extraction.titles, hosts)
    struct = {p: structure_simhash(tree_of(read_page(corpus / p))) for p in pages}
    groups: dict[str, list[int]] = defaultdict(list)
    guarded: dict[str, list[int]] = defaultdict(list)
    for pair in sets.labelled + sets.hard:
        a, b = fps.sides[fps.index[pair.a]], fps.sides[fps.index[pair.b]]
        if a.host is None or a.host != b.host or min(a.length, b.length) >= GUARD_MAX_LENGTH:
            continue
        label = "hard negative" if pair.label == "hard-negative" else pair.label
        d = structure_distance(struct[pair.a], struct[pair.b])
        groups[label].append(d)
        if repeated_boilerplate(a, b):
            guarded[label].append(d)
    # soft-404 flags on real pages: every host's pages through HostStructure.observe, in path order
    from neardup.crawl.templates import HostStructure

    by_host: dict[str, list[str]] = defaultdict(list)
    for p in pages:
        if hosts.get(p):  # the Detector has no host for a page without a URL: no host state
            by_host[str(hosts[p])].append(p)
    flagged: list[str] = []
    short = 0
    for _host, host_pages in sorted(by_host.items()):
        state = HostStructure()
        for n, p in enumerate(sorted(host_pages)):
            i = fps.index[p]
            short += fps.sides[i].length < 1000
            obs = state.observe(float(n), struct[p], fps.digest[i], fps.sides[i].length, p)
            if obs.flag:
                flagged.append(f"{p} ({obs.flag})")
    return {"groups": dict(groups), "guarded": dict(guarded), "pairs": len(sets.labelled) + len(sets.hard),
            "extract_seconds": extraction.seconds, "soft404_pages": len(pages), "soft404_hosts": len(by_host),
            "soft404_short": short, "soft404_flagged": flagged}


# --------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------

def render(result: dict[str, Any]) -> str:
    c = result["cost"]
    lines = [BEGIN, "", "## Structure fingerprints", "",
             "Generated by `benchmarks/structure.py` (issue 23): `neardup.fingerprint.structure.structure_simhash` "
             "(a 64-bit SimHash of the DOM: every element's label (tag, class tokens and id, digits removed), "
             "its root-to-node label paths of 1-4 elements and its sibling step, as a set with weight "
             "1 + log2(count)) and `neardup.crawl.templates` (templates, redesigns, soft-404s).", "",
             "```", "PYTHONPATH=src python benchmarks/structure.py --corpus ../shared/corpus --out docs/quality.md",
             "# the texts of the ensemble kept between runs, the numbers kept for --from-json",
             "# (NEARDUP_SRC=other/src measures another checkout's code):",
             "PYTHONPATH=src python benchmarks/structure.py --cache /tmp/texts --json /tmp/structure.json",
             "python benchmarks/structure.py --from-json /tmp/structure.json --out docs/quality.md",
             "```", "",
             "The tests on the same pages: `NEARDUP_CORPUS=../shared/corpus PYTHONPATH=src pytest "
             "tests/test_structure.py tests/test_templates.py`.", "",
             f"Machine: Python {result['machine']}; load average {result['load_start']} at the start, "
             f"{result['load_end']} at the end (2 cores shared). Whole run {result['cpu']:.0f} s CPU.", "",
             "### Cost", "",
             f"{c['pages']} real pages (every 4th Big9 page, all CleanPortalEval, every 4th postlight page), "
             "CPU time per page (`time.process_time`). *structure*: `structure_simhash(tree)` on the tree "
             "the extractor already parsed (Lexbor serialises it, one compiled pass reads the tags); "
             "*parse*: `HTMLTree.parse` of the decoded page (paid once by the extractor, not by the structure); "
             "*fingerprint*: `neardup.fingerprint(bytes)` with that extractor, the whole page-to-fingerprint "
             "cost. "
             "Target: structure <= 10% of the fingerprint.", ""]
    pp = c["per_page"]
    def ms(key: str) -> list[str]:
        return [f"{statistics.median(pp[key]) * 1e3:.2f}", f"{np.percentile(pp[key], 95) * 1e3:.2f}",
                f"{c['totals'][key] / c['pages'] * 1e3:.2f}"]

    rows = [["structure (given the tree)", *ms("structure"), ""],
            ["of which Lexbor's serialisation (`document.html`)", *ms("serialise"), ""],
            ["`structure_of(bytes)` (parses)", *ms("structure_of"), ""],
            ["parse (`HTMLTree.parse`)", *ms("parse"), ""]]
    for e in c["extractors"]:
        share = c["totals"]["structure"] / c["totals"][e]
        rows.append([f"fingerprint, extractor `{e}`", f"{statistics.median(pp[e]) * 1e3:.2f}",
                     f"{np.percentile(pp[e], 95) * 1e3:.2f}", f"{c['totals'][e] / c['pages'] * 1e3:.2f}",
                     f"{share:.1%} (median page {statistics.median(c['ratios'][e]):.1%}, "
                     f"p95 {np.percentile(c['ratios'][e], 95):.1%})"])
    lines += table(["what", "median ms", "p95 ms", "mean ms", "structure / fingerprint (total)"], rows)
    notes = []
    for e in c["extractors"]:
        share = c["totals"]["structure"] / c["totals"][e]
        notes.append(f"`{e}` {share:.1%} ({'meets' if share <= 0.10 else '**over**'} the 10% target)")
    lines += ["", "Structure over the whole fingerprint, all pages together: " + ", ".join(notes) + ". "
              "Where the time goes: Lexbor's serialisation of the tree "
              f"({c['totals']['serialise'] / c['totals']['structure']:.0%} of the structure's time here, measured "
              "apart, warm), then one compiled call that reads the str in place (no encoding), hashes the tags "
              "and votes in exact fixed point; the float32 numpy vote (the definition) decides the pages where a "
              "bit is within float32 rounding of a tie (about 1 in 10, the large ones, ~0.3 ms each). The values "
              "are the same bit for bit as the first implementation's (UTF-8 bytes, numpy vote on every page): "
              "all 8,201 corpus pages compared when it changed, 0 differ. With an exact vote on every page "
              "(no float32 path) the structure would cost about 0.06 ms less a page (hybrid: about 10% instead "
              "of 11%) and 13 of the 8,201 pages would differ by one bit (ties the float32 sum rounds, by "
              "OpenBLAS's order: not the same on every CPU either). A walk of the "
              "tree from Python (`first_element_child` / `next_element_sibling`, reading tag, id and class) costs "
              "about 2.5 us an element, 1.7 ms for a 650-element page: several times this path.", "",
              "### Distances", "",
              "Hamming distance between the structure values of page pairs (n, min, p5, median, p95, max).", ""]
    drows = []
    for source, groups in result["distances"]:
        for kind, values in groups.items():
            drows.append([source, kind] + q(values))
    lines += table(["corpus", "pairs", "n", "min", "p5", "median", "p95", "max"], drows, text_columns=(0, 1))
    lines += ["", "Big9 site-years are not all one template: `cnn` 2017 mixes money.cnn.com and edition.cnn.com "
              "pages, `nypost` 2013 and `nymag` 2005 two layouts each; the p95 within a site-year is those "
              "pairs. Across sites the median is below 32 because every page shares `html`, `head`, `body`, "
              "`meta`...", "",
              "### Templates: the threshold", "",
              "`templates()` at each threshold: Big9's 360 pages in one stream (years in order), and each "
              "CleanPortalEval site alone (4 sites of one template each: washingtonpost.com's two blog groups "
              "as one).", ""]
    lines += table(["threshold", "Big9 templates", "templates with pages of > 1 site", "site-years on 1 template",
                    "site-years on <= 2", "CPE sites on 1 template", "CPE largest template share (mean)"],
                   result["sweep"])
    lines += ["", f"Chosen: **{TEMPLATE_DISTANCE} bits** (`neardup.crawl.templates.TEMPLATE_DISTANCE`): the largest "
              "threshold at which no template holds pages of two sites.", "",
              "### Redesigns", "",
              "Rule (`neardup.crawl.templates.redesigns`, module docs): at page i, the most frequent template of the "
              f"{REDESIGN_WINDOW} pages from i on (a full window: the new structure persists, as the add-time "
              f"state sees it) is new (at most one page in the {REDESIGN_WINDOW} before, at most 20% of all pages "
              "before: no return to an old template) and holds >= 20% of them; the old templates (those of the "
              f"{REDESIGN_WINDOW} pages before i and the host's earlier ones with >= 2 pages) hold <= 20% of them; "
              f">= {MIN_PAGES} pages before i; the split (old before, not old after) has a chance under "
              f"{MAX_CHANCE} of arising from one mix of templates in random order (one-sided Fisher exact test: "
              "5 old pages then 10 new pass, 5 then 5 do not); and the templates the host was on (>= 2 of the "
              "pages before) never take more than 20% of all later fetches. The event's time is the first page "
              "on the new template or one that repeats after the move (a one-off page at the edge goes with "
              "the side its structure is nearer). The earlier rule (5 pages a side, no chance test, the window "
              "before as the only old templates) gave 128 boundaries, 8 events elsewhere and 4 events in "
              "site-years alone: a site with two layouts whose 10 pages came five and five. The full window is "
              "the add-time rule's and 0.001 a conventional level; compared on these runs: a chance level of "
              "1e-4 finds 133 boundaries, 1e-5 128 and loses reddit.com's move; the event time rule was changed "
              "after seeing events placed on odd pages before a boundary (7 of the 8 elsewhere). The checks "
              "no rule was compared on are the held-out part: 40-page streams of one site-year, CleanPortalEval, "
              "postlight (newyorker.com's 2021 event had 6 pages after it: under a full window, no longer "
              "reported).", ""]
    r = result["big9_redesigns"]
    lines += [f"Big9, each of the 9 sites' 40 pages in time order (2005, 2009, 2013, 2017; shuffled within a year, "
              f"seeds {', '.join(map(str, SEEDS))}: {r['runs']} runs, {3 * r['runs']} year boundaries): "
              f"**{r['found']} boundaries found**, {r['missed']} missed, {r['wrong']} events elsewhere. "
              f"Each site-year's 10 pages alone ({r['site_years']} runs): **{r['alone']} events**. "
              f"Each site-year as a 40-page stream (its pages drawn with replacement, {r['site_years']} runs): "
              f"**{r['drawn']} events**. The add-time state (`HostStructure.observe`, what the Detector keeps) on "
              f"the same streams: {r['online_found']} boundaries found, {r['online_wrong']} events elsewhere, "
              f"{r['online_drawn']} in the 40-page streams of one site-year.", "",
              "Events with seed 1 (year + page index within the year; the boundary is +0):", ""]
    lines += table(["site", "events"], [[s, ", ".join(v) or "none"] for s, v in r["detail"].items()])
    lines += ["", "postlight-fixtures hosts with >= 10 page versions (a redesign needs 5 before and 10 after), "
              "in capture order (one time per commit day; pages of one day are simultaneous):", ""]
    lines += table(["host", "pages", "2016-2021 / 2022", "templates", "redesigns"], result["postlight_redesigns"],
                   text_columns=(0, 4))
    cr = result.get("cpe_redesigns")
    if cr:
        lines += ["", f"CleanPortalEval (one template a site; each site in manifest order and 5 shuffled orders, "
                  f"{cr['runs']} runs): **{cr['events']} redesign events** ({cr['online']} at add time)."]
    e = result.get("ensemble")
    if e:
        lines += ["", "### Ensemble: structure distance on the boilerplate guard's pairs", "",
                  "Pairs of the quality harness (labelled pairs and same-site hard negatives, "
                  f"{e['pairs']:,} in all) of one host whose shorter main text (`accurate`) is under "
                  "1,000 bytes, the pairs where `neardup.matching.repeated_boilerplate` can apply; *guarded*: "
                  "those it separates (titles differ). Structure distance by label:", ""]
        erows = []
        for label in sorted(set(e["groups"]) | set(e["guarded"])):
            erows.append([label, "all short"] + q(e["groups"].get(label, [])))
            erows.append([label, "guarded"] + q(e["guarded"].get(label, [])))
        lines += table(["label", "pairs", "n", "min", "p5", "median", "p95", "max"], erows, text_columns=(0, 1))
        guarded_pos = sum(len(e["guarded"].get(k, [])) for k in ("same-content", "near-duplicate"))
        short_pos = e["groups"].get("same-content", []) + e["groups"].get("near-duplicate", [])
        hard = e["groups"].get("hard negative", [])
        lines += ["", f"Reading: the guard separates {sum(len(v) for v in e['guarded'].values())} pairs here and "
                  f"{guarded_pos} of them are duplicates (same-content or near-duplicate), so there is no recall for "
                  "the structure to win back inside the guard. Outside it, the short same-host duplicates "
                  f"({len(short_pos)}) are spread over the whole range (structure distance "
                  f"{', '.join(str(d) for d in sorted(short_pos))}: recaptures across a redesign are far), while "
                  f"different pages of one host are close (hard negatives: median {statistics.median(hard):.0f} bits, "
                  "one template). A structure condition in the match rule would separate nothing the title test "
                  "does not, and would cost the recaptures across a redesign. **Not adopted**: "
                  "`neardup.matching` is unchanged; the structure serves the host signals (templates, redesigns, "
                  "soft-404s), not the pair decision.", "",
                  "### Soft-404 flags on real pages", "",
                  f"Every page of those pairs ({e['soft404_pages']:,} pages, {e['soft404_hosts']} hosts, "
                  f"{e['soft404_short']} with a main text under 1,000 bytes) through `HostStructure.observe` host by "
                  f"host (digest and length from `accurate`): **{len(e['soft404_flagged'])} flagged**"
                  + (": " + "; ".join(f"`{x}`" for x in e["soft404_flagged"][:10]) if e["soft404_flagged"] else "")
                  + ". The corpus has no error pages; the rule is tested on made ones in tests/test_templates.py. "
                  "A flagged real page here is one where `accurate` took a text the host repeats for the article "
                  "(Dragnet's tweetrightbrain.posterous.com posts: the author box, on 4 posts of one template): "
                  "what the detector holds of it is template text, so the flag is right for indexing "
                  "(`template-only` content) but such a page is not a dead URL; the verdict should say "
                  "\"do not index\", and a crawler should only skip URLs on a flag it sees repeat."]
    lines += ["", END]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path,
                    default=CORPUS)
    ap.add_argument("--cost-only", action="store_true", help="print the cost table only")
    ap.add_argument("--out", type=Path, default=None, help="write the section into this file (docs/quality.md)")
    ap.add_argument("--cache", type=Path, default=None, help="keep extracted texts here (ensemble)")
    ap.add_argument("--no-ensemble", action="store_true")
    ap.add_argument("--cost-every", type=int, default=4)
    ap.add_argument("--json", type=Path, default=None, help="also write the raw results here")
    ap.add_argument("--from-json", type=Path, default=None, help="render the results of an earlier --json run")
    args = ap.parse_args(argv)
    corpus = args.corpus
    if args.from_json:
        import json

        report = render(json.loads(args.from_json.read_text(encoding="utf-8")))
        print(report)
        if args.out:
            replace_section(args.out, BEGIN, END, report)
        return 0

    log = logger("structure")
    cpu0 = time.process_time()
    load_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    b9, cpe, pl = big9(corpus), cleanportaleval(corpus), postlight(corpus)
    cost_pages = [r["file"] for r in b9[::args.cost_every]] + [r["file"] for r in cpe] + \
        [r["file"] for r in pl[::args.cost_every]]
    result: dict[str, Any] = {"machine": f"{platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs"}
    result["cost"] = cost(corpus, cost_pages, log)
    if args.cost_only:
        c = result["cost"]
        for key, value in sorted(c["totals"].items()):
            pp = c["per_page"][key]
            print(f"{key}: mean {value / c['pages'] * 1e3:.2f} ms, median {statistics.median(pp) * 1e3:.2f} ms")
        for e in c["extractors"]:
            print(f"structure / {e}: total {c['totals']['structure'] / c['totals'][e]:.1%}, "
                  f"median page {statistics.median(c['ratios'][e]):.1%}")
        return 0
    log("structures")
    for rows in (b9, cpe, pl):
        structures(corpus, rows)
    result["distances"] = [("Big9", pair_distances(b9, big9_kind)),
                           ("CleanPortalEval", pair_distances(cpe, site_kind)),
                           ("postlight-fixtures", pair_distances(pl, postlight_kind))]
    result["sweep"] = template_sweep(b9, cpe)
    result["big9_redesigns"] = big9_redesigns(b9)
    result["postlight_redesigns"] = postlight_redesigns(pl)
    result["cpe_redesigns"] = cleanportaleval_redesigns(cpe)
    if not args.no_ensemble:
        result["ensemble"] = ensemble(corpus, args.cache, log)
    result["cpu"] = time.process_time() - cpu0
    result["load_start"] = load_start
    result["load_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    report = render(result)
    print(report)
    if args.json:
        import json

        args.json.write_text(json.dumps(result, default=str), encoding="utf-8")
    if args.out:
        replace_section(args.out, BEGIN, END, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
