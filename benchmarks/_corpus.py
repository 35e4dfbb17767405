"""The shared corpus as the benchmark scripts read it: its tab-separated manifests, its pages
(gzipped HTML), the labelled pairs of ``near-dup-pairs/pairs.tsv`` and the hard negatives
(pairs of different pages of one site), and every manifest page with its source and host.

Where the corpus is: :data:`_common.CORPUS` (``NEARDUP_CORPUS``, else ``shared/corpus`` beside
the checkout); the functions take the folder, so ``--corpus`` can name another.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from urllib.parse import urlsplit

NEGATIVE_LABELS = ("shared-boilerplate-only", "different-content")
#: labels of pairs that are no hard negative, whatever their site
DUPLICATE_LABELS = ("same-content", "near-duplicate", "partial-overlap")
#: the hard-negative collections: every pair of different pages within one site
HARD_SOURCES = ("cleanportaleval", "utomo-big9", "dragnet")
DRAGNET_MIN_HOST_PAGES = 5
#: the corpus folders whose every page enters the all-pairs measurements (cross-site pairs)
ALL_PAIRS_SOURCES = ("dragnet", "trafilatura", "cleaneval", "l3s-gn1", "scrapinghub-aeb", "cleanportaleval",
                     "utomo-news-extraction")
#: every folder with a manifest: page -> URL / host for the repeated-boilerplate guard
MANIFEST_SOURCES = ALL_PAIRS_SOURCES + ("postlight-fixtures", "readability")

# Duplicates named in the dataset READMEs that a same-URL test cannot see (dragnet/README.md:
# "R491/R492 the same Reuters story under two URLs"); they are not negatives.
KNOWN_DUPLICATES = frozenset({frozenset({"dragnet/html/R491.html.gz", "dragnet/html/R492.html.gz"})})


# -- files -----------------------------------------------------------------------------------

def read_tsv(path: Path) -> list[dict[str, str]]:
    """Rows of a tab-separated file with a header line (a manifest, pairs.tsv)."""
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def manifest_rows(folder: Path, limit: int | None = None) -> list[list[str]]:
    """The rows of a corpus folder's ``manifest.tsv`` as lists of fields (file, url, ...),
    header left out; the first ``limit`` when given."""
    lines = (folder / "manifest.tsv").read_text(encoding="utf-8").splitlines()[1:]
    rows = [line.rstrip("\n").split("\t") for line in lines]
    return rows[:limit] if limit else rows


def read_page(path: Path) -> bytes:
    """A page's original bytes (the corpus keeps them gzipped)."""
    with gzip.open(path) as fh:
        return fh.read()


def file_digest(path: Path) -> str:
    """SHA-256 of a page's original (decompressed) bytes."""
    return hashlib.sha256(read_page(path)).hexdigest()


# -- pairs -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Pair:
    """Two pages (paths relative to the corpus root) and what the pair is.

    label: the pairs.tsv label, or ``hard-negative``; source: ``pairs.tsv`` or the hard-negative
    collection (``cleanportaleval``, ``utomo-big9``, ``dragnet``); group: the site or host."""

    pair_id: str
    a: str
    b: str
    label: str
    source: str
    group: str = ""
    note: str = ""


@dataclass
class PairSets:
    """The labelled pairs and the hard negatives, plus how the negatives were filtered."""

    labelled: list[Pair]
    hard: list[Pair]
    excluded: dict[str, int] = field(default_factory=dict)

    def count(self, label: str) -> int:
        """How many labelled pairs carry ``label``."""
        return sum(p.label == label for p in self.labelled)

    def pages(self) -> list[str]:
        """Every page path used by any pair, sorted."""
        return sorted({p for pair in self.labelled + self.hard for p in (pair.a, pair.b)})


def load_labelled_pairs(corpus: Path) -> list[Pair]:
    """All pairs of ``near-dup-pairs/pairs.tsv``."""
    rows = read_tsv(corpus / "near-dup-pairs" / "pairs.tsv")
    return [
        Pair(r["pair_id"], r["a"], r["b"], r["label"], "pairs.tsv", r["evidence"], r.get("note", ""))
        for r in rows
    ]


def normalise_url(url: str) -> str:
    """URL identity for the same-URL test: no scheme, no ``www.``, no fragment or trailing slash."""
    parts = urlsplit(url.strip().lower())
    host = parts.netloc.removeprefix("www.")
    path = parts.path.rstrip("/")
    return f"{host}{path}?{parts.query}" if parts.query else f"{host}{path}"


def site_groups(corpus: Path) -> dict[str, dict[str, list[tuple[str, str]]]]:
    """Hard-negative collections: source -> site -> [(page path, URL)]."""
    groups: dict[str, dict[str, list[tuple[str, str]]]] = {s: defaultdict(list) for s in HARD_SOURCES}
    for r in read_tsv(corpus / "cleanportaleval" / "manifest.tsv"):
        site = r["site_group"].split("_")[0]  # washingtonpost.com_blog1 + _blog2: one site
        groups["cleanportaleval"][site].append((f"cleanportaleval/{r['file']}", r.get("url_from_html", "")))
    for r in read_tsv(corpus / "utomo-news-extraction" / "manifest.tsv"):
        if r["set"] == "big9":
            groups["utomo-big9"][r["site"]].append((f"utomo-news-extraction/{r['file']}", r.get("url_from_html", "")))
    dragnet: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for r in read_tsv(corpus / "dragnet" / "manifest.tsv"):
        if r["host"]:
            dragnet[r["host"]].append((f"dragnet/{r['file']}", r.get("url_from_html", "")))
    groups["dragnet"] = {h: pages for h, pages in dragnet.items() if len(pages) >= DRAGNET_MIN_HOST_PAGES}
    return groups


def page_locations(corpus: Path) -> dict[str, tuple[str, str | None]]:
    """Every manifest page of the corpus: path -> (source folder, host or None). The host is
    the URL's (as the product sees it), else the manifest's site or host column."""
    from neardup.urls import host_of  # here: after the script has imported _common (this checkout first)

    out: dict[str, tuple[str, str | None]] = {}
    for source in MANIFEST_SOURCES:
        manifest = corpus / source / "manifest.tsv"
        if not manifest.is_file():
            continue
        for r in read_tsv(manifest):
            file = r.get("file") or (f"{r['dir']}/source.html.gz" if r.get("dir") else "")
            url = r.get("url") or r.get("url_from_html") or ""
            host = host_of(url) if url else ""
            out[f"{source}/{file}"] = (source, host or r.get("host") or r.get("site") or r.get("site_group") or None)
    return out


def all_pairs_pages(corpus: Path, locations: dict[str, tuple[str, str | None]] | None = None) -> list[str]:
    """The pages of :data:`ALL_PAIRS_SOURCES` that are there, sorted (``locations``: those of
    :func:`page_locations`, when already read)."""
    locations = page_locations(corpus) if locations is None else locations
    return sorted(p for p, (source, _) in locations.items() if source in ALL_PAIRS_SOURCES and (corpus / p).is_file())


def build_hard_negatives(corpus: Path, labelled: Sequence[Pair],
                         pages_per_site: int | None = None) -> tuple[list[Pair], dict[str, int]]:
    """Every pair of different pages within one site, minus pairs that are really duplicates.

    Removed: pairs that pairs.tsv labels same-content / near-duplicate / partial-overlap,
    byte-identical files, pages naming the same URL, and :data:`KNOWN_DUPLICATES`.
    ``pages_per_site`` keeps only the first pages of each site (for a quick run)."""
    duplicates = {frozenset((p.a, p.b)) for p in labelled if p.label in DUPLICATE_LABELS}
    digests: dict[str, str] = {}
    excluded = {"pairs.tsv duplicate": 0, "byte-identical": 0, "same URL": 0, "README duplicate": 0}
    pairs: list[Pair] = []
    for source, sites in site_groups(corpus).items():
        for site, pages in sorted(sites.items()):
            pages = sorted(pages)[:pages_per_site]
            for (a, url_a), (b, url_b) in combinations(pages, 2):
                key = frozenset((a, b))
                if key in duplicates:
                    excluded["pairs.tsv duplicate"] += 1
                    continue
                for p in (a, b):
                    if p not in digests:
                        digests[p] = file_digest(corpus / p)
                if digests[a] == digests[b]:
                    excluded["byte-identical"] += 1
                    continue
                if url_a and url_b and normalise_url(url_a) == normalise_url(url_b):
                    excluded["same URL"] += 1
                    continue
                if key in KNOWN_DUPLICATES:
                    excluded["README duplicate"] += 1
                    continue
                pairs.append(Pair(f"{source}:{site}:{len(pairs)}", a, b, "hard-negative", source, site))
    return pairs, excluded


def load_pairs(corpus: Path, pages_per_site: int | None = None) -> PairSets:
    """The labelled pairs and the hard negatives (of the first ``pages_per_site`` pages of each
    site when given)."""
    labelled = load_labelled_pairs(corpus)
    hard, excluded = build_hard_negatives(corpus, labelled, pages_per_site)
    return PairSets(labelled, hard, excluded)
