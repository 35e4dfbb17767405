"""Fingerprinting speed: text -> fingerprint and page -> fingerprint, side by side with peers.

Everything runs in one invocation, in one process, single-threaded (``NUMBA_NUM_THREADS=1``),
on this machine:

* **text -> fingerprint** on generated documents (a Zipf(1.1) vocabulary of 50,000 random
  lowercase words, 1,180 words / about 8 KB per document, a blank line every 60 words, fixed
  seed) and on the main texts of the 181 real pages of ``shared/corpus/scrapinghub-aeb``
  (extracted once with :func:`neardup.fingerprint.extract.extract_main_content`, fast extractor; only
  text -> fingerprint is timed). Variants: neardup ``fingerprint_text`` (default config, and
  the ``shingles`` 3 and ``chars`` 4 feature schemes; all include NFKC + casefold, whitespace
  normalisation, the SHA-256 digest and the SimHash), the ``simhash`` package (1e0ng,
  ``Simhash(features)`` on word 3-shingles built in Python, as its users do) and
  ``datasketch`` ``MinHash(num_perm=128).update_batch`` on the same 3-shingles (utf-8).
  A breakdown splits neardup's default path into its parts.
* **page -> fingerprint** on the 181 scrapinghub-aeb pages: neardup ``fingerprint(html)``
  with each extractor (``fast`` = Resiliparse, ``accurate`` = trafilatura) against the
  extractor alone (Resiliparse ``extract_plain_text(HTMLTree.parse_from_bytes(html),
  main_content=True)``; ``trafilatura.extract(html, fast=True)``), with neardup's overhead in
  percent, and **page -> verdict** (:func:`page_to_verdict`: an in-memory
  ``neardup.Detector()`` (default k), ``add(url, html)`` for every page; skipped with a note when
  ``neardup.Detector`` does not exist).

Rates are per CPU second of this process (``time.process_time``), i.e. per core: the variants
run round-robin over all the documents, ``--repeats`` rounds (3), and the median round counts.
The machine is shared, so read ratios within a table rather than absolute rates.

Usage::

    python benchmarks/fingerprint.py --quick      # < 1 minute (warm numba cache), no report unless --doc
    python benchmarks/fingerprint.py              # full run (a few minutes), writes docs/benchmarks.md

Progress goes to stderr, the report into ``docs/benchmarks.md`` between
``<!-- fingerprint:start -->`` and ``<!-- fingerprint:end -->`` (``--no-doc`` to skip; other
sections are kept), and a JSON summary is the last line of stdout.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# single-threaded kernels, peers and BLAS: set before numpy and numba are imported
os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
from _common import CORPUS, DOC, logger, py_shingles, replace_section, table, timed, zipf_vocabulary
from _common import machine as machine_of
from _corpus import manifest_rows, read_page

import neardup
from neardup.fingerprint import _kernels as K
from neardup.fingerprint.core import FingerprintConfig, fingerprint, fingerprint_text
from neardup.fingerprint.extract import extract_main_content
from neardup.fingerprint.features import FeatureConfig
from neardup.fingerprint.normalize import folded_array

DEFAULT_CORPUS = CORPUS
START, END = "<!-- fingerprint:start -->", "<!-- fingerprint:end -->"
SEED = 20240611
WORDS_PER_DOC = 1180

try:
    from simhash import Simhash
except ImportError:  # optional peer
    Simhash = None
try:
    from datasketch import MinHash
except ImportError:  # optional peer
    MinHash = None
extract_plain_text: Any  # None where the import fails (the static types of the installed modules otherwise)
HTMLTree: Any
trafilatura: Any
try:
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree
except ImportError:  # neardup needs it, but keep the script importable
    extract_plain_text = HTMLTree = None
try:
    import trafilatura
except ImportError:
    trafilatura = None

# Figures of shared/reference/peer-benchmarks.md (section 1, 20,000 generated documents of
# ~8.2 KB, single core, median of 3; measured earlier on this project's machines).
PEER_REFERENCE = [
    ("simhash (1e0ng) 3-word shingles, md5", 7.59, "the simhash package rows above"),
    ("numpy simhash: xxh64/feature + unpackbits + sum", 21.00, "throwaway prototype"),
    ("numba simhash end-to-end (bytes->tokens->hash->fp)", 227.01,
     "throwaway prototype, ASCII only, no normalisation or digest"),
    ("datasketch MinHash(128) update_batch (sha1 / xxh32)", 8.18, "8.18 with sha1_hash32, 14.94 with xxh32"),
    ("rensa RMinHash(128) update", 31.59, "not installed here"),
]


log = logger("fingerprint")


def machine() -> dict[str, Any]:
    return machine_of(("neardup", "numpy", "numba", "simhash", "datasketch", "resiliparse", "trafilatura"))


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------

def zipf_documents(n: int, words_per_doc: int = WORDS_PER_DOC, vocab: int = 50_000,
                   seed: int = SEED) -> list[str]:
    """``n`` documents of ``words_per_doc`` words (about 8 KB): random lowercase words of 2 to
    10 letters drawn from a Zipf(1.1) distribution over ``vocab`` words, single spaces, a
    blank line every 60 words (paragraphs)."""
    rng = np.random.default_rng(seed)
    words, p = zipf_vocabulary(rng, vocab)
    docs = []
    for _ in range(n):
        ids = rng.choice(vocab, words_per_doc, p=p)
        paras = [" ".join(words[i] for i in ids[k:k + 60]) for k in range(0, words_per_doc, 60)]
        docs.append("\n\n".join(paras))
    return docs


def corpus_pages(corpus: Path, limit: int | None) -> list[tuple[str, bytes]]:
    """(url, html bytes) of the scrapinghub-aeb pages (see its README and manifest.tsv)."""
    folder = corpus / "scrapinghub-aeb"
    return [(row[1], read_page(folder / row[0])) for row in manifest_rows(folder, limit)]


# --------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------

def run_variants(variants: list[dict[str, Any]], items: Sequence[Any], nbytes: float,
                 repeats: int, chunk: int = 25) -> list[dict[str, Any]]:
    """Every variant over all ``items``, ``repeats`` rounds; the median round (CPU seconds)
    gives docs/s and MB/s per core (``nbytes`` of input per round).

    Within a round the variants take turns on chunks of ``chunk`` items (their order
    alternating), so a burst of load from other jobs hits all of them about equally."""
    for v in variants:  # warm up: numba dispatch, imports, caches
        if "setup" in v:
            v["setup"]()
        for x in items[:3]:
            v["fn"](x)
    cpu: dict[str, list[float]] = {v["name"]: [] for v in variants}
    wall: dict[str, list[float]] = {v["name"]: [] for v in variants}
    chunks = [items[i:i + chunk] for i in range(0, len(items), chunk)]
    for r in range(repeats):
        gc.collect()
        for v in variants:
            if "setup" in v:  # outside the timer
                v["setup"]()
        c_round = {v["name"]: 0.0 for v in variants}
        w_round = {v["name"]: 0.0 for v in variants}
        for k, part in enumerate(chunks):
            for v in (variants if (r + k) % 2 == 0 else variants[::-1]):
                c, w = timed(part, v["fn"])
                c_round[v["name"]] += c
                w_round[v["name"]] += w
        for v in variants:
            cpu[v["name"]].append(c_round[v["name"]])
            wall[v["name"]].append(w_round[v["name"]])
        log(f"  round {r + 1}/{repeats}: " + ", ".join(
            f"{v['name'].split(' (')[0][:28]} {nbytes / 1e6 / max(cpu[v['name']][-1], 1e-9):.1f}"
            for v in variants) + " MB/s")
    rows = []
    for v in variants:
        c = statistics.median(cpu[v["name"]])
        w = statistics.median(wall[v["name"]])
        rows.append({"name": v["name"], "group": v.get("group", ""), "note": v.get("note", ""),
                     "verdict": bool(v.get("verdict")),
                     "cpu_s": c, "wall_s": w, "docs_per_s": len(items) / c, "mb_per_s": nbytes / 1e6 / c,
                     "us_per_doc": c / len(items) * 1e6, "cpu_rounds": cpu[v["name"]]})
    return rows


# --------------------------------------------------------------------------------------------
# text -> fingerprint
# --------------------------------------------------------------------------------------------

WORDS = FingerprintConfig()
WORDS_V1 = FingerprintConfig(version=1)  # neardup 0.1: no IDF weights, no sketch
SHINGLES3 = FingerprintConfig(features=FeatureConfig(scheme="shingles", ngram=3))
CHARS4 = FingerprintConfig(features=FeatureConfig(scheme="chars", ngram=4))


def text_variants() -> list[dict[str, Any]]:
    kargs = WORDS.features.kernel_args()
    kernel_args = (*kargs, 1, WORDS.sketch_bins, WORDS.sketch_ngram)
    v: list[dict[str, Any]] = [
        {"name": "neardup fingerprint_text (default: words)", "group": "neardup",
         "fn": lambda t: fingerprint_text(t, WORDS),
         "note": "NFKC + casefold, normalise, SHA-256 digest, IDF-weighted SimHash, 64-byte sketch; compiled"},
        {"name": "neardup fingerprint_text (spec version 1: words)", "group": "neardup",
         "fn": lambda t: fingerprint_text(t, WORDS_V1),
         "note": "the same without IDF weights and without the sketch (neardup 0.1)"},
        {"name": "neardup fingerprint_text (shingles 3)", "group": "neardup",
         "fn": lambda t: fingerprint_text(t, SHINGLES3), "note": "word 3-shingles"},
        {"name": "neardup fingerprint_text (chars 4)", "group": "neardup",
         "fn": lambda t: fingerprint_text(t, CHARS4), "note": "code point 4-grams"},
    ]
    if Simhash is not None:
        v.append({"name": "simhash (1e0ng) Simhash(3-shingles)", "group": "peer",
                  "fn": lambda t: Simhash(py_shingles(t)).value,
                  "note": "Python shingles, md5 per shingle"})
    if MinHash is not None:
        def ds(t: str) -> Any:
            m = MinHash(num_perm=128)
            m.update_batch([s.encode("utf-8") for s in py_shingles(t)])
            return m.hashvalues
        v.append({"name": "datasketch MinHash(128).update_batch(3-shingles)", "group": "peer", "fn": ds,
                  "note": "Python shingles, sha1_hash32 (default); a MinHash object per document"})
    # where neardup's default path spends its time (parts of the first row)
    v += [
        {"name": "part: NFKC + casefold + utf-8 (folded_array)", "group": "part",
         "fn": folded_array, "note": "Python's unicodedata / str methods (C)"},
        {"name": "part: compiled kernel (simhash_from_bytes)", "group": "part",
         "fn": lambda t: K.simhash_from_bytes(FOLDED[t], K.CHAR_TABLE, *kernel_args),
         "note": "normalise whitespace, tokenise, hash, weigh (IDF), SimHash, sketch (input pre-folded)"},
        {"name": "part: SHA-256 digest (hashlib)", "group": "part",
         "fn": lambda t: hashlib.sha256(FOLDED[t].tobytes()).hexdigest(),
         "note": "of the normalised bytes (about the same size)"},
    ]
    return v


FOLDED: dict[str, np.ndarray] = {}


def text_rows(texts: list[str], repeats: int) -> list[dict[str, Any]]:
    FOLDED.clear()
    FOLDED.update({t: folded_array(t) for t in texts})
    nbytes = float(sum(len(t.encode("utf-8", "surrogatepass")) for t in texts))
    rows = run_variants(text_variants(), texts, nbytes, repeats)
    FOLDED.clear()
    return rows


# --------------------------------------------------------------------------------------------
# page -> fingerprint, page -> verdict
# --------------------------------------------------------------------------------------------

FAST = FingerprintConfig(extractor="fast")
ACCURATE = FingerprintConfig(extractor="accurate")


def page_to_verdict() -> dict[str, Any] | None:
    """Hook: page -> verdict with ``neardup.Detector().add(url, html)`` (in memory, default k,
    default configuration, so the default extractor).

    Returns a variant (a fresh Detector for every round, created outside the timer), or None
    when ``neardup.Detector`` is not available."""
    detector_cls = getattr(neardup, "Detector", None)
    if detector_cls is None:
        return None
    extractor = getattr(getattr(neardup, "DEFAULT_CONFIG", None), "extractor", "fast")
    holder: dict[str, Any] = {}

    def setup() -> None:
        old = holder.pop("det", None)
        if old is not None and hasattr(old, "close"):
            old.close()
        holder["det"] = detector_cls()

    def add(page: tuple[str, bytes]) -> Any:
        return holder["det"].add(page[0], page[1])

    return {"name": f"neardup Detector().add(url, html) ({extractor})", "group": extractor, "fn": add,
            "setup": setup, "verdict": True,
            "note": "in-memory store, default config; fingerprint + index lookup + record"}


def page_variants() -> tuple[list[dict[str, Any]], str | None]:
    v: list[dict[str, Any]] = []
    if HTMLTree is not None:
        v.append({"name": "resiliparse extract_plain_text(main_content=True) alone", "group": "fast",
                  "fn": lambda p: extract_plain_text(HTMLTree.parse_from_bytes(p[1]), main_content=True),
                  "note": "HTMLTree.parse_from_bytes + extract_plain_text"})
    v.append({"name": "neardup extract_main_content (fast)", "group": "fast",
              "fn": lambda p: extract_main_content(p[1], p[0], extractor="fast"),
              "note": "encoding, Resiliparse main content, headings/lists, title, canonical, language"})
    v.append({"name": "neardup fingerprint(html) (fast)", "group": "fast",
              "fn": lambda p: fingerprint(p[1], p[0], config=FAST), "note": "the above + fingerprint_text"})
    if trafilatura is not None:
        v.append({"name": "trafilatura.extract(fast=True) alone", "group": "accurate",
                  "fn": lambda p: trafilatura.extract(p[1], fast=True), "note": "txt output"})
    v.append({"name": "neardup fingerprint(html) (accurate)", "group": "accurate",
              "fn": lambda p: fingerprint(p[1], p[0], config=ACCURATE),
              "note": "trafilatura (fast=True, Markdown) + metadata + fingerprint_text"})
    verdict = page_to_verdict()
    note = None
    if verdict is not None:
        v.append(verdict)
    else:
        note = "neardup.Detector is not available in this checkout: page -> verdict skipped"
    return v, note


def page_rows(pages: list[tuple[str, bytes]], repeats: int) -> tuple[list[dict[str, Any]], str | None]:
    variants, note = page_variants()
    nbytes = float(sum(len(p[1]) for p in pages))
    return run_variants(variants, pages, nbytes, repeats), note


BASELINES = {"fast": "resiliparse extract_plain_text(main_content=True) alone",
             "accurate": "trafilatura.extract(fast=True) alone"}


def overhead_of(rows: list[dict[str, Any]], row: dict[str, Any]) -> float | None:
    """Extra CPU time of ``row`` over the extractor alone, in percent: the median over the
    rounds of the ratio within a round (both ran back to back), minus 1."""
    base = next((r for r in rows if r["name"] == BASELINES.get(row["group"], "")), None)
    if base is None or base is row:
        return None
    ratios = [a / b for a, b in zip(row["cpu_rounds"], base["cpu_rounds"]) if b > 0]
    return 100.0 * (statistics.median(ratios) - 1.0) if ratios else None


def overheads(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """neardup's page -> fingerprint (and page -> verdict) time over the extractor alone."""
    out: dict[str, float | None] = {}
    for label, name in (("fast", "neardup fingerprint(html) (fast)"),
                        ("fast_extract_only", "neardup extract_main_content (fast)"),
                        ("accurate", "neardup fingerprint(html) (accurate)")):
        r = next((r for r in rows if r["name"] == name), None)
        out[label] = None if r is None else overhead_of(rows, r)
    r = next((r for r in rows if r.get("verdict")), None)
    out["verdict"] = None if r is None else overhead_of(rows, r)
    return out


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------

def fmt(x: float | None, digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and np.isnan(x)):
        return "-"
    return f"{x:,.{digits}f}"


def find(rows: list[dict[str, Any]], prefix: str) -> dict[str, Any] | None:
    return next((r for r in rows if r["name"].startswith(prefix)), None)


def text_table(rows: list[dict[str, Any]]) -> list[str]:
    ref = find(rows, "simhash (1e0ng)")
    nd = find(rows, "neardup fingerprint_text (default")
    out = []
    for r in rows:
        if r["group"] == "part":
            share = f"{100 * r['cpu_s'] / nd['cpu_s']:.0f}% of the default row" if nd else "-"
            out.append([r["name"], fmt(r["docs_per_s"], 0), fmt(r["mb_per_s"]), fmt(r["us_per_doc"]), share, r["note"]])
        else:
            ratio = f"{r['mb_per_s'] / ref['mb_per_s']:.1f}x" if ref else "-"
            out.append([r["name"], fmt(r["docs_per_s"], 0), fmt(r["mb_per_s"]), fmt(r["us_per_doc"]), ratio, r["note"]])
    return table(("variant", "docs/s", "MB/s per core", "µs/doc", "vs simhash package", "what is timed"), out,
                 text_columns=(0, 5))


def page_table(rows: list[dict[str, Any]]) -> list[str]:
    out = []
    for r in rows:
        o = overhead_of(rows, r)
        out.append([r["name"], fmt(r["docs_per_s"], 1), fmt(r["mb_per_s"]), fmt(r["us_per_doc"] / 1000, 2),
                    "-" if o is None else f"{o:+.1f}%", r["note"]])
    return table(("variant", "pages/s", "MB/s of HTML per core", "ms/page", "vs extractor alone", "what is timed"), out,
                 text_columns=(0, 5))


def render(res: dict[str, Any]) -> str:
    m = res["machine"]
    v = m["versions"]
    syn, real = res["synthetic"], res["real"]
    nd_syn = find(syn, "neardup fingerprint_text (default")
    kern_syn = find(syn, "part: compiled kernel")
    lines = [START, "## Fingerprinting (`benchmarks/fingerprint.py`)", "",
             "Generated by `benchmarks/fingerprint.py`; do not edit by hand.", "",
             "```", res["command"], "```", "",
             f"Machine: {m['cpu']}, {m['nproc']} CPUs (nproc), {m['memory']} RAM, Python {m['python']}, {m['os']}; "
             f"neardup {v['neardup']}, numpy {v['numpy']}, numba {v['numba']}, simhash {v['simhash']}, "
             f"datasketch {v['datasketch']}, resiliparse {v['resiliparse']}, trafilatura {v['trafilatura']}. "
             f"The machine is shared with other jobs, so rates vary by some 10-30% between runs (more under load). "
             f"Single-threaded; rates are per CPU second of this process (per core): the variants run round-robin over "
             f"all the documents, {res['repeats']} rounds, and the median round counts. "
             f"Run time {res['seconds']:.0f} s.",
             "", "### text -> fingerprint", "",
             f"Generated documents: {res['n_docs']:,} documents, {res['syn_mb']:.1f} MB (mean {res['syn_kb']:.1f} KB, "
             f"{WORDS_PER_DOC:,} words each: random lowercase words of a Zipf(1.1) vocabulary of 50,000, "
             f"single spaces, "
             f"a blank line every 60 words, seed {SEED}).", ""]
    lines += text_table(syn)
    lines += [""]
    if real:
        lines += [f"Real texts: the main text of the {res['n_real']} pages of `shared/corpus/scrapinghub-aeb` "
                  f"(news and blog articles, a few of them Russian or German), {res['real_mb']:.2f} MB (mean "
                  f"{res['real_kb']:.1f} KB), extracted once with `extract_main_content` (fast extractor, "
                  f"{res['real_extract_s']:.1f} s, not timed below).", ""]
        lines += text_table(real)
        lines += [""]
    lines += ["The `part:` rows split the default row: the compiled kernel gets the folded bytes, the digest "
              "hashes bytes of the same size; what the three parts leave of the default row is Python glue in "
              "`fingerprint_text` / `simhash_of_text` (configuration spec string, the `Fingerprint` object, "
              "call overhead), a fixed cost per document.", ""]
    if nd_syn and kern_syn:
        lines += [f"Target: 200 MB/s per core for text -> SimHash. On the generated documents the whole "
                  f"`fingerprint_text` runs at {nd_syn['mb_per_s']:.0f} MB/s per core and its compiled kernel alone "
                  f"at {kern_syn['mb_per_s']:.0f} MB/s (on a quiet machine the kernel measured about 200-240 MB/s "
                  f"on these documents; this run's machine load shows in the peer rows too)."]
        nd_real, fold_real = find(real, "neardup fingerprint_text (default"), find(real, "part: NFKC")
        if nd_real and fold_real:
            lines += [f" On the real texts, Unicode normalisation (`unicodedata.normalize('NFKC')`, in "
                      f"`neardup.fingerprint.normalize`) takes {100 * fold_real['cpu_s'] / nd_real['cpu_s']:.0f}% of "
                      f"`fingerprint_text`: CPython normalises a whole string as soon as one character is not "
                      f"NFKC (a no-break space is enough, in half of these texts)."]
        lines += [""]
    lines += ["Published figures for comparison (`shared/reference/peer-benchmarks.md`, section 1: 20,000 generated "
              "documents of ~8.2 KB, measured earlier on this project's machines; the prototypes were throwaway "
              "code written to find the limits):", ""]
    ref_rows = [[name, fmt(mb, 2), note] for name, mb, note in PEER_REFERENCE]
    lines += table(("method (peer-benchmarks.md)", "MB/s per core", "note"), ref_rows, text_columns=(0, 2))
    lines += [""]
    if res["pages"]:
        over = res["overhead_pct"]
        lines += ["### page -> fingerprint and page -> verdict", "",
                  f"The {res['n_pages']} pages of `shared/corpus/scrapinghub-aeb` ({res['pages_mb']:.1f} MB of HTML, "
                  f"mean {res['pages_kb']:.0f} KB). *vs extractor alone* is the extra CPU time over the extractor "
                  f"by itself (Resiliparse for `fast` rows, trafilatura for `accurate` ones; the Detector uses the "
                  f"default configuration's extractor), the median over the rounds of the ratio of two back-to-back "
                  f"runs; target: at most +10% for the whole page -> fingerprint path.", ""]
        lines += page_table(res["pages"])
        lines += [""]
        if res.get("verdict_note"):
            lines += [res["verdict_note"], ""]
        lines += [f"Overhead of page -> fingerprint over the extractor alone: fast {fmt(over.get('fast'))}% "
                  f"(of which neardup's extraction wrapper {fmt(over.get('fast_extract_only'))}%), accurate "
                  f"{fmt(over.get('accurate'))}%; page -> verdict {fmt(over.get('verdict'))}%.", ""]
    lines += [END]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------

def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--docs", type=int, default=None, help="generated documents (default 3000; --quick 200)")
    p.add_argument("--pages", type=int, default=None, help="scrapinghub-aeb pages (default all 181; --quick 30)")
    p.add_argument("--repeats", type=int, default=3, help="rounds per variant; the median counts (default 3)")
    p.add_argument("--quick", action="store_true", help="small run, < 1 minute; no report unless --doc")
    p.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="folder holding scrapinghub-aeb/")
    p.add_argument("--doc", dest="doc", action="store_true", default=None, help="write docs/benchmarks.md")
    p.add_argument("--no-doc", dest="doc", action="store_false")
    return p.parse_args(argv)


def summarize_rows(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ref = find(rows, "simhash (1e0ng)")
    out: dict[str, Any] = {}
    for r in rows:
        key = r["name"]
        out[key] = {"mb_per_s": round(r["mb_per_s"], 2), "docs_per_s": round(r["docs_per_s"], 1)}
        if ref and r["group"] != "part":
            out[key]["vs_simhash"] = round(r["mb_per_s"] / ref["mb_per_s"], 2)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    q = args.quick
    n_docs = args.docs or (200 if q else 3000)
    n_pages = args.pages if args.pages is not None else (30 if q else 0)
    write_doc = (not q) if args.doc is None else args.doc
    command = "python benchmarks/fingerprint.py" + " ".join(
        [""] + [a for a in (argv if argv is not None else sys.argv[1:]) if a not in ("--doc", "--no-doc")])
    started = time.perf_counter()
    res: dict[str, Any] = {"quick": q, "command": command.strip(), "repeats": args.repeats, "machine": machine()}

    log(f"compiling / loading kernels, generating {n_docs} documents")
    fingerprint_text("warm up the compiled kernels", WORDS)
    docs = zipf_documents(n_docs)
    res["n_docs"] = n_docs
    syn_bytes = sum(len(d.encode()) for d in docs)
    res["syn_mb"], res["syn_kb"] = syn_bytes / 1e6, syn_bytes / n_docs / 1e3
    log(f"text -> fingerprint: {n_docs} generated documents ({res['syn_mb']:.1f} MB)")
    res["synthetic"] = text_rows(docs, args.repeats)

    res["real"], res["pages"], res["overhead_pct"] = [], [], {}
    if (args.corpus / "scrapinghub-aeb" / "manifest.tsv").is_file():
        pages = corpus_pages(args.corpus, None)
        t0 = time.perf_counter()
        texts = [t for t in (extract_main_content(html, url).text for url, html in pages) if t.strip()]
        res["real_extract_s"] = time.perf_counter() - t0
        real_bytes = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
        res["n_real"], res["real_mb"], res["real_kb"] = len(texts), real_bytes / 1e6, real_bytes / len(texts) / 1e3
        log(f"text -> fingerprint: {len(texts)} real texts ({res['real_mb']:.2f} MB)")
        res["real"] = text_rows(texts, args.repeats)
        sel = pages[:n_pages] if n_pages else pages
        page_bytes = sum(len(p[1]) for p in sel)
        res["n_pages"], res["pages_mb"], res["pages_kb"] = len(sel), page_bytes / 1e6, page_bytes / len(sel) / 1e3
        log(f"page -> fingerprint: {len(sel)} pages ({res['pages_mb']:.1f} MB of HTML)")
        res["pages"], res["verdict_note"] = page_rows(sel, args.repeats)
        if res["verdict_note"]:
            log(res["verdict_note"])
        res["overhead_pct"] = overheads(res["pages"])
    else:
        log(f"corpus not found at {args.corpus}: real texts and pages skipped")
    res["seconds"] = time.perf_counter() - started

    summary: dict[str, Any] = {"benchmark": "fingerprint", "quick": q, "seconds": round(res["seconds"], 1),
                               "n_docs": n_docs, "repeats": args.repeats,
                               "synthetic": summarize_rows(res["synthetic"]), "real": summarize_rows(res["real"])}
    if res["pages"]:
        summary["pages"] = {r["name"]: {"pages_per_s": round(r["docs_per_s"], 1),
                                        "ms_per_page": round(r["us_per_doc"] / 1000, 3)}
                            for r in res["pages"]}
        summary["overhead_pct"] = {k: (None if x is None else round(x, 1)) for k, x in res["overhead_pct"].items()}
        summary["verdict"] = "skipped: neardup.Detector not available" if res.get("verdict_note") else "measured"
        fast = res["overhead_pct"].get("fast")
        summary["target_fast_overhead_le_10pct"] = None if fast is None else bool(fast <= 10.0)
    nd = find(res["synthetic"], "neardup fingerprint_text (default")
    kern = find(res["synthetic"], "part: compiled kernel")
    summary["target_200_mb_s"] = {"fingerprint_text": bool(nd and nd["mb_per_s"] >= 200),
                                  "kernel": bool(kern and kern["mb_per_s"] >= 200)}
    if write_doc:
        replace_section(DOC, START, END, render(res))
        log(f"wrote the fingerprint section of {DOC}")
    log(f"done in {res['seconds']:.0f} s")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
