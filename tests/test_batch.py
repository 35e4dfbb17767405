"""neardup.batch: the order-independent batch answer, its pieces, and its agreement with
the online Detector where the arrival order does not matter."""

from __future__ import annotations

import csv
import gzip
import random
from pathlib import Path

import numpy as np
import pytest
from checks import present

from neardup.batch.dedup import dedup_batch
from neardup.batch.graph import BatchRecord, UnionFind, choose_canonical, node_id, pair_edges
from neardup.canonical import policy_from_spec
from neardup.detector.core import Detector
from neardup.detector.settings import DetectorSettings
from neardup.errors import ConfigError
from neardup.fingerprint.core import FingerprintConfig
from neardup.fingerprint.minhash import MinHashConfig
from neardup.model import DEFAULT_K, Page

WORDS = [f"word{i}" for i in range(400)]


def body(words: list[str], title: str = "T") -> str:
    return f"<html><head><title>{title}</title></head><body><article><p>{' '.join(words)}</p></article></body></html>"


def sample_list(sample_pages) -> list[Page]:
    return [Page(p.url, p.content) for p in sample_pages.values()]


def corpus_pages(corpus: Path, n: int = 300) -> list[Page]:
    """The first ``n`` pages of the Postlight fixtures (98 URLs captured 2+ times across
    redesigns, and many different articles)."""
    root = corpus / "postlight-fixtures"
    out = []
    with open(root / "manifest.tsv", encoding="utf-8", newline="") as fh:
        for row in list(csv.DictReader(fh, delimiter="\t"))[:n]:
            url = row["url_from_html"] or f"https://{row['fixture_domain']}/{row['file']}"
            out.append(Page(url, gzip.decompress((root / row["file"]).read_bytes())))
    return out


def answer(result) -> list[tuple]:
    return sorted((v.url, v.digest, v.status, v.cluster, v.canonical, v.match, v.distance) for v in result.verdicts)


def clusters_of(result) -> set[frozenset[str]]:
    out: dict[int, set[str]] = {}
    for v in result.verdicts:
        if v.status != "empty":
            out.setdefault(v.cluster, set()).add(v.url)
    return {frozenset(s) for s in out.values()}


def online(pages: list[Page], policy: str, bands: bool = True,
           k: int | None = None) -> tuple[set[frozenset[str]], dict[str, str]]:
    """The online Detector's clusters (URL sets, empty pages left out) and each page's
    final canonical URL."""
    det = Detector(settings=DetectorSettings(canonical=policy, bands=bands, k=k))
    verdicts = det.add_many(pages)
    members: dict[int, set[str]] = {}
    for p, v in zip(pages, verdicts):
        if v.cluster_id is not None:
            members.setdefault(v.cluster_id, set()).add(p.url)
    canon = {url: present(det.cluster_info(cid))["canonical_url"] for cid, urls in members.items() for url in urls}
    det.close()
    return {frozenset(s) for s in members.values()}, canon


# -- pieces ---------------------------------------------------------------------------------

def test_union_find_keeps_the_smallest_id_as_root() -> None:
    uf = UnionFind()
    for x in (5, 3, 9, 1):
        uf.add(x)
    uf.union(5, 9)
    uf.union(9, 3)
    assert uf.find(5) == uf.find(9) == 3
    uf.union(1, 5)
    assert {uf.find(x) for x in (5, 3, 9, 1)} == {1}


def test_pair_edges_long_text_is_a_star_and_short_text_follows_the_guard() -> None:
    a = [(1, "h.example", "Alpha story"), (2, "h.example", "Beta news"), (3, "h.example", "Gamma tale")]
    assert pair_edges(a, None, short=False) == [(1, 2), (1, 3)]
    assert pair_edges(a, None, short=True) == []  # one host, different titles: repeated boilerplate
    same = a + [(4, "h.example", "Alpha story - Site")]
    assert pair_edges(same, None, short=True) == [(1, 4)]
    other_host = a + [(7, "mirror.example", "Whatever")]
    edges = pair_edges(other_host, None, short=True)
    uf = UnionFind()
    for n in (1, 2, 3, 7):
        uf.add(n)
    for x, y in edges:
        uf.union(x, y)
    assert {uf.find(n) for n in (1, 2, 3, 7)} == {1}
    assert len(edges) == 3  # linear, not every pair
    no_host = [(1, None, "A b c"), (2, None, "X y z")]
    assert pair_edges(no_host, None, short=True) == [(1, 2)]  # file: URLs are never guarded


def test_choose_canonical_does_not_depend_on_member_order() -> None:
    policy = policy_from_spec(None)
    members = [("https://b.example/x", 0.0, "d", None, None, None), ("https://a.example/x", 0.0, "d", None, None, None),
               ("https://c.example/x", 0.0, "d", None, "https://c.example/x", None)]
    assert members[choose_canonical(policy, members)][0] == "https://c.example/x"  # named by rel=canonical
    rev = members[::-1]
    assert rev[choose_canonical(policy, rev)][0] == "https://c.example/x"
    plain = [m[:4] + (None, None) for m in members]
    assert plain[choose_canonical(policy, plain)][0] == "https://a.example/x"  # no times: the URL decides


def test_node_ids_are_63_bit_and_stable() -> None:
    n = node_id("d" * 64, "h.example", "T")
    assert 0 <= n < 1 << 63 and n == node_id("d" * 64, "h.example", "T") != node_id("d" * 64, "h.example", None)


# -- the whole job --------------------------------------------------------------------------

def test_transitive_chain_is_one_cluster_even_when_the_ends_do_not_match() -> None:
    base = WORDS[:300]
    a = base
    b = base[:200] + [f"x{i}" for i in range(100)]
    c = base[:100] + [f"x{i}" for i in range(100)] + [f"y{i}" for i in range(100)]
    pages = [Page("https://a.example/1", body(a)), Page("https://b.example/1", body(b)),
             Page("https://c.example/1", body(c))]
    res = dedup_batch(pages, k=63, verify=0.3)
    linked = {(x[:9], y[:9]) for x, y, _, _ in res.pairs}
    assert len(res.pairs) == 2 and len(linked) == 2  # a~b, b~c, not a~c
    assert len({v.cluster for v in res.verdicts}) == 1
    assert [v.status for v in res.verdicts] == ["new", "near", "near"]


def test_exact_copies_and_the_repeated_boilerplate_guard() -> None:
    sidebar = " ".join(WORDS[:40])  # short main text, repeated by one host under different titles
    pages = [Page("https://h.example/1", body(sidebar.split(), "First post")),
             Page("https://h.example/2", body(sidebar.split(), "Second article")),
             Page("https://h.example/1?utm=x", body(sidebar.split(), "First post")),
             Page("https://mirror.example/2", body(sidebar.split(), "Second article - Mirror"))]
    res = dedup_batch(pages)
    cl = [v.cluster for v in res.verdicts]
    # 1 and its utm copy are exact; 2 and the mirror are exact; the mirror (another host)
    # matches 1 too, so everything is one cluster
    assert len(set(cl)) == 1
    assert sorted(v.status for v in res.verdicts) == ["exact", "exact", "exact", "new"]
    alone = dedup_batch(pages[:3])
    assert len({v.cluster for v in alone.verdicts}) == 2  # without the mirror the guard splits them


def test_order_independent_on_the_sample(sample_pages) -> None:
    pages = sample_list(sample_pages)
    first = dedup_batch(pages)
    rng = random.Random(7)
    for _ in range(2):
        shuffled = pages[:]
        rng.shuffle(shuffled)
        assert answer(dedup_batch(shuffled)) == answer(first)
    groups: dict[str, set[str]] = {}
    for p in sample_pages.values():
        groups.setdefault(p.group, set()).add(p.url)
    assert clusters_of(first) == {frozenset(s) for s in groups.values()}


def test_agrees_with_the_online_detector_on_the_sample(sample_pages) -> None:
    pages = sample_list(sample_pages)
    res = dedup_batch(pages, canonical="shortest-url")
    clusters, canon = online(pages, "shortest-url")
    assert clusters_of(res) == clusters
    assert {v.url: v.canonical for v in res.verdicts if v.status != "empty"} == canon


def test_agrees_with_the_online_detector_on_corpus_pages(corpus) -> None:
    # one capture per URL: a URL fetched again is a version of itself on both sides, but online
    # a re-fetch near its stored version keeps the URL's first decision, while the batch job
    # decides a URL by its last capture (docs/batch.md); tests/test_batch_versions.py compares those
    latest = {p.url: p for p in corpus_pages(corpus, 300)}
    pages = list(latest.values())
    res = dedup_batch(pages, canonical="shortest-url", jobs=2)
    assert not res.errors and len(res.verdicts) == len(pages)
    clusters, canon = online(pages, "shortest-url")
    batch = clusters_of(res)
    # every online cluster lies inside one batch cluster (an online join is a matching
    # pair); where they differ, a page matches two online clusters (one of them through the
    # bands beyond k: the hellogiggles recaptures, one of which is a different extraction)
    assert all(any(c <= b for b in batch) for c in clusters)
    differ = batch - clusters
    assert len(differ) <= 2
    assert {v.url: v.canonical for v in res.verdicts if v.status != "empty"
            and not any(v.url in c for c in differ)} == {u: c for u, c in canon.items()
                                                        if not any(u in d for d in differ)}
    assert sum(len(c) > 1 for c in batch) >= 40
    # without the bands too: online, a page joins its best match's cluster; the batch job
    # joins every matching pair (hellogiggles: one recapture matches two captures that the
    # repeated-boilerplate guard keeps apart), so clusters may only merge, in one place here
    plain = dedup_batch(pages, canonical="shortest-url", jobs=2, bands=False)
    clusters, canon = online(pages, "shortest-url", bands=False)
    assert all(any(c <= b for b in clusters_of(plain)) for c in clusters)
    differ = clusters_of(plain) - clusters
    assert len(differ) <= 1
    assert {v.url: v.canonical for v in plain.verdicts if v.status != "empty"
            and not any(v.url in c for c in differ)} == {u: c for u, c in canon.items()
                                                        if not any(u in d for d in differ)}
    shuffled = pages[:]
    random.Random(3).shuffle(shuffled)
    assert answer(dedup_batch(shuffled, canonical="shortest-url")) == answer(res)


def test_precomputed_records_give_the_same_answer(sample_pages) -> None:
    from neardup.fingerprint.core import fingerprint
    pages = sample_list(sample_pages)
    records = [BatchRecord.of(p.url, fingerprint(p.content, url=p.url)) for p in pages]
    assert answer(dedup_batch(records)) == answer(dedup_batch(pages))


def test_minhash_method(sample_pages) -> None:
    pages = sample_list(sample_pages)
    res = dedup_batch(pages, method="minhash", threshold=0.5)
    assert len(res.verdicts) == len(pages)
    simh = clusters_of(dedup_batch(pages))
    # MinHash at 0.5 finds a subset of the recapture groups (redesigns change more text)
    assert all(any(c <= s for s in simh) for c in clusters_of(res))
    shuffled = pages[::-1]
    assert answer(dedup_batch(shuffled, method="minhash", threshold=0.5)) == answer(res)
    cfg = FingerprintConfig(minhash=MinHashConfig())
    assert answer(dedup_batch(pages, method="minhash", threshold=0.5, config=cfg)) == answer(res)


def test_bad_arguments() -> None:
    with pytest.raises(ConfigError):
        dedup_batch([], method="lsh")
    with pytest.raises(ConfigError):
        dedup_batch([], k=64)
    assert dedup_batch([]).verdicts == []


def test_unreadable_pages_are_reported_not_fatal() -> None:
    res = dedup_batch([Page("https://a.example/", b"%PDF-1.4 \x00\x01binary"),
                       Page("https://b.example/", body(WORDS[:50]))])
    assert len(res.errors) == 1 and [v.url for v in res.verdicts] == ["https://b.example/"]


# -- the candidate stage: sketch bands, giant buckets, Parquet ---------------------------------

def edited_pairs(n: int, seed: int = 1) -> list[Page]:
    """``n`` articles of 300 random words, each with a copy on another host whose last 90
    words are replaced (a word 3-shingle Jaccard of 0.54: more than half the text): sketch
    0.46-0.65, SimHash distances mostly over 12."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(5000)]
    out = []
    for i in range(n):
        a = [rng.choice(vocab) for _ in range(300)]
        b = a[:210] + [rng.choice(vocab) for _ in range(90)]
        out += [Page(f"https://a{i}.example/x", body(a, f"A{i}")), Page(f"https://b{i}.example/y", body(b, f"B{i}"))]
    return out


def test_band_candidates_beyond_k_are_found_as_online() -> None:
    pages = edited_pairs(30)
    for k in (None, 12):  # the default (3 with the bands) and the SimHash-only default
        res = dedup_batch(pages, canonical="shortest-url", k=k)
        far = [d for _, _, d, _ in res.pairs if d > (k or DEFAULT_K)]
        assert len(res.pairs) >= 24 and len(far) >= 15  # the bands bring most of them at any distance
        clusters, canon = online(pages, "shortest-url", k=k)
        assert clusters_of(res) == clusters and len(clusters) == 60 - len(res.pairs)
        assert {v.url: v.canonical for v in res.verdicts} == canon
    plain = dedup_batch(pages, canonical="shortest-url", bands=False)  # k = 12 without the bands
    assert sorted(plain.pairs) == sorted(p for p in res.pairs if p[2] <= 12)
    assert clusters_of(plain) == online(pages, "shortest-url", bands=False)[0]


def trap_records(copies: int, seed: int = 5) -> list[BatchRecord]:
    """A crawler trap: ``copies`` distinct near copies of one page under different titles
    (bins 0..15 equal, so all in one block of every band, and 4 of the other 44 redrawn: a
    sketch estimate of 0.87 or more, over the FAR_TITLE_VERIFY that pages of one host with
    different titles need beyond k, matching.far_match), random SimHash values; beside it 200
    unrelated pages, 50 of them with a near copy."""
    import numpy as np

    rng = np.random.default_rng(seed)
    header = (400).to_bytes(4, "little")
    base = rng.integers(0, 256, 60, dtype=np.uint8)
    recs = []
    for i in range(copies):
        bins = base.copy()
        redo = 16 + rng.choice(44, 4, replace=False)
        bins[redo] = rng.integers(0, 256, 4, dtype=np.uint8)
        recs.append(BatchRecord(f"https://trap.example/cal?d={i}", f"t{i:07d}", int(rng.integers(0, 2**63)) * 2 + 1,
                                sketch=header + bins.tobytes(), title=f"Day {i}", length=4000))
    for i in range(200):
        bins = rng.integers(0, 256, 60, dtype=np.uint8)
        recs.append(BatchRecord(f"https://p{i}.example/", f"p{i:07d}", int(rng.integers(0, 2**63)),
                                sketch=header + bins.tobytes(), title=f"P{i}", length=4000))
        if i < 50:
            bins = bins.copy()
            redo = rng.choice(60, 20, replace=False)
            bins[redo] = rng.integers(0, 256, 20, dtype=np.uint8)
            recs.append(BatchRecord(f"https://q{i}.example/", f"q{i:07d}", int(rng.integers(0, 2**63)),
                                    sketch=header + bins.tobytes(), title=f"Q{i}", length=4000))
    return recs


def test_giant_bucket_is_windowed_and_keeps_the_answer() -> None:
    from neardup.batch.blocks import bucket_pairs

    recs = trap_records(1500)
    full = dedup_batch(recs, max_bucket=10**6)  # every pair of the trap's blocks
    split = dedup_batch(recs, max_bucket=100)  # windowed: about 32 pairs a copy, not 750
    assert answer(split) == answer(full)
    trap = {v.cluster for v in full.verdicts if "trap" in v.url}
    assert len(trap) == 1 and sum(len(m) == 2 for m in full.clusters.values()) == 50
    assert len(split.pairs) < len(full.pairs) / 10
    keys = np.zeros(10_000, dtype=np.int64)  # one bucket of 10^4 rows: linear, not 5 10^7 pairs
    a, b = bucket_pairs(keys, np.arange(10_000, dtype=np.int64), max_bucket=100, window=8)
    assert a.shape[0] == sum(10_000 - d for d in range(1, 9)) and bool(np.all(b - a == (b - a).clip(1, 8)))


def test_parquet_round_trip(sample_pages, tmp_path) -> None:
    pytest.importorskip("pyarrow")
    from neardup.batch.files import read_fingerprints, write_fingerprints
    from neardup.fingerprint.core import fingerprint

    pages = sample_list(sample_pages)
    records = [BatchRecord.of(p.url, fingerprint(p.content, url=p.url), first_seen=1.5e9 + i,
                              priority=0.5 if i % 2 else None) for i, p in enumerate(pages)]
    assert write_fingerprints(records, str(tmp_path / "fps.parquet"), row_group=7) == len(records)
    back = read_fingerprints(str(tmp_path / "fps.parquet"))
    assert back == records and any(r.simhash >= 1 << 63 for r in back)
    assert answer(dedup_batch(back)) == answer(dedup_batch(records))
    with pytest.raises(ConfigError):
        import pyarrow as pa
        import pyarrow.parquet as pq
        pq.write_table(pa.table({"url": ["x"]}), str(tmp_path / "bad.parquet"))
        read_fingerprints(str(tmp_path / "bad.parquet"))


def test_density_alone_never_windows_a_block() -> None:
    """Random pages fill a 16-bit block with N / 65,536 groups; past 256 a fixed cap would
    window such a block and lose pairs that share only it. The default cap grows with N
    (bucket_cap), so at 2 10^5 pages a block of 260 is still compared pairwise: all 126
    planted pairs sharing only band 0 are found (a cap of 256 finds a few)."""
    import numpy as np

    from neardup.batch.blocks import MAX_BUCKET, bucket_cap

    n, planted = 200_000, 126
    rng = np.random.default_rng(2)
    header = (400).to_bytes(4, "little")
    bins = rng.integers(0, 256, (n, 60), dtype=np.uint8)
    sims = rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2)
    bins[: 2 * planted, 0:2] = 9  # one band-0 block: the planted groups and a few random ones
    bins[planted: 2 * planted, 16:] = bins[:planted, 16:]  # 46 of 60 bins equal, bands 1..7 differ
    size = int(((bins[:, 0] == 9) & (bins[:, 1] == 9)).sum())
    assert MAX_BUCKET < size <= bucket_cap(n)
    recs = [BatchRecord(f"https://h{i}.example/p", f"d{i:08d}", int(sims[i]), sketch=header + bins[i].tobytes(),
                        title=f"T{i}", length=4000) for i in range(n)]
    planted_pairs = {(f"d{i:08d}", f"d{i + planted:08d}") for i in range(planted)}
    found = {(a, b) for a, b, _, _ in dedup_batch(recs).pairs}
    assert found == planted_pairs
    assert len({(a, b) for a, b, _, _ in dedup_batch(recs, max_bucket=MAX_BUCKET).pairs}) < planted / 2
