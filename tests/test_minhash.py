"""MinHash signatures, LSH banding and the Detector's ``minhash`` / ``both`` methods.

Real inputs: the pages of ``examples/sample`` (``sample_pages`` fixture) and, where present,
the labelled pairs of ``shared/corpus/near-dup-pairs/pairs.tsv`` (``corpus`` fixture). The
statistical checks use fixed seeds, so they are deterministic; their tolerances are stated
next to each assertion.
"""

from __future__ import annotations

import csv
import gzip
import itertools
import math
import sqlite3
from functools import cache

import numpy as np
import pytest
from checks import present, sql_store
from faults import Boom, explode_on_cluster_update
from legacy_store import write_legacy_store

import neardup
from neardup import ConfigError, Detector, FingerprintConfig, Page, SpecMismatchError
from neardup.fingerprint.extract import extract_main_content
from neardup.fingerprint.features import FeatureConfig, extract_features
from neardup.fingerprint.minhash import (
    SPEC_VERSION,
    MinHashConfig,
    MinHashSignature,
    containment,
    jaccard,
    minhash_features,
    minhash_text,
)
from neardup.index.lsh import MinHashLSH, candidate_probability, optimal_bands
from neardup.store import sqlite as store_mod

NUM_PERM = 128

# -- pinned values ------------------------------------------------------------------------
#
# Signatures are stored in the SQLite store and compared across runs and machines, so the
# values for a given MinHash spec must never change silently. They were computed once with
# the code at MinHash SPEC_VERSION 1. IF A TEST HERE FAILS, the signature algorithm changed
# (permutation draw, hash family, feature extraction, normalisation...): either revert the
# change or bump ``SPEC_VERSION`` in ``neardup/minhash.py`` (stores with the old spec then
# refuse the new one) and only then re-pin these values together with the spec string.

ENGLISH = ("The committee met on Tuesday to discuss the budget for the coming year. Members agreed "
           "that spending on roads and schools should rise, while administrative costs must fall.")
JAPANESE = "東京都は日本の首都であり、世界でも有数の大都市として知られている。"

PINNED_SPEC = "neardup-minhash/1;perm=128;seed=1;hash=mulshift32;set=shingles3"
PINNED = {
    # text -> (first 8 uint32 of the signature, feature set size)
    "english": ([45442875, 600292951, 160728238, 83640765, 100421560, 121333663, 151711422, 26269139], 26),
    "japanese": ([170500782, 172950162, 15820758, 189733759, 100077472, 152615174, 107434516, 419441802], 29),
}


def test_minhash_spec_version_and_spec_string():
    assert SPEC_VERSION == 1, "MinHash SPEC_VERSION changed: re-pin the values in this file"
    cfg = MinHashConfig()
    assert cfg.spec == PINNED_SPEC
    # the fingerprint spec names the MinHash spec, so a store notices a change
    assert f";minhash=({PINNED_SPEC})" in FingerprintConfig(minhash=cfg).spec


@pytest.mark.parametrize("name", sorted(PINNED))
def test_pinned_signature(name):
    text = {"english": ENGLISH, "japanese": JAPANESE}[name]
    sig = minhash_text(text, MinHashConfig())
    first, size = PINNED[name]
    assert sig.signature.dtype == np.uint32 and sig.signature.shape == (NUM_PERM,)
    assert sig.signature[:8].tolist() == first
    assert sig.set_size == size
    assert sig.spec == PINNED_SPEC
    # deterministic, and the same through the explicit feature path
    feats, _ = extract_features(text, MinHashConfig().features)
    assert np.array_equal(minhash_features(feats, MinHashConfig()).signature, sig.signature)


def test_signature_bytes_round_trip():
    sig = minhash_text(ENGLISH)
    data = sig.to_bytes()
    assert len(data) == 4 * NUM_PERM
    back = MinHashSignature.from_bytes(data, sig.set_size, sig.spec)
    assert np.array_equal(back.signature, sig.signature) and back.signature.dtype == np.uint32


def test_signature_ignores_case_and_whitespace():
    a = minhash_text(ENGLISH)
    b = minhash_text("  " + ENGLISH.upper().replace(" ", "   \n ") + "  ")
    assert np.array_equal(a.signature, b.signature)
    empty = minhash_text("")
    assert empty.set_size == 0 and (empty.signature == 0xFFFFFFFF).all()


# -- estimated vs exact Jaccard on real texts -------------------------------------------------

@cache
def _feature_set(text: str) -> frozenset[int]:
    feats, _ = extract_features(text, MinHashConfig().features)
    return frozenset(feats.tolist())


def exact_jaccard(a: str, b: str) -> float:
    fa, fb = _feature_set(a), _feature_set(b)
    union = fa | fb
    return len(fa & fb) / len(union) if union else 1.0


def estimated_jaccard(a: str, b: str) -> float:
    return jaccard(minhash_text(a).signature, minhash_text(b).signature)


def check_estimates(pairs: list[tuple[str, str]], label: str) -> float:
    """Assert the estimator's accuracy on ``pairs``; returns the mean absolute error."""
    exact = np.array([exact_jaccard(a, b) for a, b in pairs])
    est = np.array([estimated_jaccard(a, b) for a, b in pairs])
    err = np.abs(est - exact)
    mae = float(err.mean())
    # theory: the estimate is a binomial share, sd = sqrt(J (1 - J) / num_perm)
    sd = np.sqrt(exact * (1 - exact) / NUM_PERM)
    print(f"{label}: {len(pairs)} pairs, exact J in [{exact.min():.3f}, {exact.max():.3f}], "
          f"MAE {mae:.4f} (theory {float(np.mean(sd)) * math.sqrt(2 / math.pi):.4f}), max error {err.max():.4f}")
    assert len(pairs) >= 40
    assert mae <= 1.5 / math.sqrt(NUM_PERM), (label, mae)
    # each pair within 4.5 sd (plus two positions of slack for 32-bit collisions at J near 0 or 1)
    worst = int(np.argmax(err - 4.5 * sd))
    assert (err <= 4.5 * sd + 2 / NUM_PERM).all(), (label, exact[worst], est[worst])
    # no systematic bias: the mean signed error is within 4 standard errors of 0
    bias = float(np.mean(est - exact))
    assert abs(bias) <= 4 * float(np.sqrt(np.mean(sd**2) / len(pairs))) + 1 / NUM_PERM, (label, bias)
    return mae


@pytest.fixture(scope="module")
def sample_texts(sample_pages) -> dict[str, str]:
    """Main text of every sample page with the product's extractor."""
    return {name: extract_main_content(p.content, p.url, extractor="accurate").text
            for name, p in sample_pages.items()}


def test_estimate_matches_exact_jaccard_on_sample_pages(sample_pages, sample_texts):
    """Same-site pairs (recaptures and different articles) and splices of two real articles
    covering the whole Jaccard range."""
    names = sorted(sample_texts)
    pairs = [(sample_texts[a], sample_texts[b]) for a, b in itertools.combinations(names, 2)
             if sample_pages[a].host == sample_pages[b].host or sample_pages[a].group == sample_pages[b].group]
    longest = sorted((n for n in names if not n.startswith("japan")),
                     key=lambda n: -len(sample_texts[n].split()))[:6]
    for first, second in itertools.pairwise(longest):
        words = sample_texts[first].split()
        other = sample_texts[second].split()
        n = min(len(words), 600)
        for keep in (0.15, 0.3, 0.45, 0.6, 0.75, 0.9):
            cut = int(n * keep)
            # the first `cut` words of `first`, then the rest from `second`
            pairs.append((" ".join(words[:n]), " ".join(words[:cut] + other[: n - cut])))
    check_estimates(pairs, "sample")


@pytest.fixture(scope="module")
def pair_texts(corpus) -> list[tuple[str, str, str]]:
    """(label, text a, text b) for every pairs.tsv pair (fast extractor: the estimator's
    accuracy does not depend on which extractor made the texts)."""
    texts: dict[str, str] = {}

    def text(path: str) -> str:
        if path not in texts:
            texts[path] = extract_main_content(gzip.decompress((corpus / path).read_bytes()), extractor="fast").text
        return texts[path]

    with open(corpus / "near-dup-pairs" / "pairs.tsv", encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    return [(r["label"], text(r["a"]), text(r["b"])) for r in rows]


def test_estimate_matches_exact_jaccard_on_labelled_pairs(pair_texts):
    pairs = [(a, b) for _, a, b in pair_texts if _feature_set(a) and _feature_set(b)]
    check_estimates(pairs, "pairs.tsv")
    mid = [(a, b) for a, b in pairs if 0.2 <= exact_jaccard(a, b) <= 0.8]
    assert len(mid) >= 10, "pairs.tsv should hold pairs of intermediate similarity"


# -- the LSH S-curve ----------------------------------------------------------------------------

def planted_pair(rng: np.random.Generator, s: float, union: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """Two sets of random 64-bit features with Jaccard exactly ``s`` (``union`` features in all)."""
    u = rng.integers(0, 2**64 - 1, union, dtype=np.uint64, endpoint=True)
    shared = round(s * union)
    rest = u[shared:]
    half = len(rest) // 2
    return np.concatenate([u[:shared], rest[:half]]), np.concatenate([u[:shared], rest[half:]])


@pytest.mark.parametrize("threshold", [0.8, 0.5])
def test_candidate_rate_follows_the_s_curve(threshold):
    """400 pairs per similarity: the share that becomes LSH candidates matches
    1 - (1 - s^r)^b within 4 binomial standard deviations (+ 1%)."""
    cfg = MinHashConfig()
    rng = np.random.default_rng(20240501 + int(threshold * 100))
    probe = MinHashLSH(cfg, threshold=threshold)
    bands, rows = probe.bands, probe.rows
    assert bands * rows <= NUM_PERM
    n = 400
    report = []
    for s in (0.3, 0.5, 0.7, 0.8, 0.9):
        lsh = MinHashLSH(cfg, threshold=threshold, bands=bands, rows=rows)
        pairs = [planted_pair(rng, s) for _ in range(n)]
        lsh.add_many(list(range(n)), np.stack([minhash_features(a, cfg).signature for a, _ in pairs]))
        hits = sum(i in {pid for pid, _ in lsh.query(minhash_features(b, cfg).signature, 0.0)}
                   for i, (_, b) in enumerate(pairs))
        p = float(candidate_probability(s, bands, rows))
        rate = hits / n
        tol = 4 * math.sqrt(p * (1 - p) / n) + 0.01
        report.append((s, rate, p))
        assert abs(rate - p) <= tol, (threshold, bands, rows, s, rate, p)
    print(f"S-curve b={bands} r={rows}: " + ", ".join(f"s={s}: {r:.3f} vs {p:.3f}" for s, r, p in report))


def test_default_banding_favours_recall():
    """MinHashLSH weighs false negatives 9:1: pages a little above the threshold are found."""
    for threshold in (0.5, 0.7, 0.8, 0.9):
        lsh = MinHashLSH(threshold=threshold)
        assert lsh.bands * lsh.rows <= NUM_PERM
        assert candidate_probability(min(threshold + 0.05, 1.0), lsh.bands, lsh.rows) >= 0.95, threshold
    assert optimal_bands(0.8, 128) == (9, 13)  # the documented even weighting
    assert float(candidate_probability(1.0, 14, 9)) == 1.0
    assert float(candidate_probability(0.0, 14, 9)) == 0.0


# -- MinHashLSH: ranking, verification, remove, replace ---------------------------------------

def _random_sig(rng: np.random.Generator) -> np.ndarray:
    return rng.integers(0, 2**32, NUM_PERM, dtype=np.uint32)


def _with_agreement(rng: np.random.Generator, q: np.ndarray, same: int) -> np.ndarray:
    """A copy of ``q`` whose last ``NUM_PERM - same`` positions differ (the first band matches)."""
    out = q.copy()
    out[same:] = q[same:] ^ rng.integers(1, 2**32, NUM_PERM - same, dtype=np.uint32)
    return out


def test_query_is_ranked_and_verified():
    rng = np.random.default_rng(3)
    lsh = MinHashLSH(threshold=0.8)
    q = _random_sig(rng)
    planted = {5: 128, 3: 128, 9: 128, 4: 120, 2: 120, 8: 110, 1: 100}  # id -> equal positions
    for pid, same in planted.items():
        lsh.add(pid, _with_agreement(rng, q, same))
    weak = _with_agreement(rng, q, lsh.rows)  # shares exactly the first band: a candidate
    lsh.add(7, weak)
    for pid in range(100, 300):
        lsh.add(pid, _random_sig(rng))
    got = lsh.query(q)
    assert got == [(3, 1.0), (5, 1.0), (9, 1.0), (2, 120 / 128), (4, 120 / 128), (8, 110 / 128)]
    assert all(score >= lsh.threshold for _, score in got)
    # the weak candidate is verified away at 0.8 but returned at its own score
    assert 7 not in dict(got)
    assert dict(lsh.query(q, threshold=0.0))[7] == pytest.approx(lsh.rows / 128)
    assert [pid for pid, _ in lsh.query(q, threshold=0.85)] == [3, 5, 9, 2, 4, 8]
    assert [pid for pid, _ in lsh.query(q, threshold=1.0)] == [3, 5, 9]
    assert len(lsh) == 208 and 7 in lsh and 6 not in lsh


def test_remove_and_re_add_replace():
    rng = np.random.default_rng(4)
    lsh = MinHashLSH(threshold=0.8)
    q = _random_sig(rng)
    lsh.add(1, q)
    lsh.add(2, _with_agreement(rng, q, 120))
    assert [pid for pid, _ in lsh.query(q)] == [1, 2]
    assert lsh.remove(1) is True and lsh.remove(1) is False and 1 not in lsh
    assert [pid for pid, _ in lsh.query(q)] == [2]
    other = _random_sig(rng)
    lsh.add(2, other)  # re-add replaces the old signature
    assert lsh.query(q) == [] and lsh.query(other) == [(2, 1.0)] and len(lsh) == 1
    assert np.array_equal(present(lsh.signature_of(2)), other) and lsh.signature_of(1) is None
    lsh.add(1, q)
    assert lsh.query(q) == [(1, 1.0)] and len(lsh) == 2


def _shares_band(q: np.ndarray, sigs: np.ndarray, bands: int, rows: int) -> np.ndarray:
    eq = sigs[:, : bands * rows].reshape(len(sigs), bands, rows) == q[: bands * rows].reshape(bands, rows)
    return eq.all(axis=2).any(axis=1)


def test_lsh_matches_brute_force_through_flushes_compactions_removes_and_replaces():
    """Thousands of inserts (batches past delta_limit and one at a time), removes and
    replacements: every query equals the brute-force answer (live pages sharing a band with
    the query, agreement >= threshold, ranked)."""
    rng = np.random.default_rng(11)
    lsh = MinHashLSH(threshold=0.7, delta_limit=256)
    live: dict[int, np.ndarray] = {}
    base = rng.integers(0, 2**32, (300, NUM_PERM), dtype=np.uint32)

    def near(i: int) -> np.ndarray:
        out = base[i % 300].copy()
        flip = rng.random(NUM_PERM) < rng.uniform(0.0, 0.5)
        out[flip] = rng.integers(0, 2**32, int(flip.sum()), dtype=np.uint32)
        return out

    batch = np.stack([near(i) for i in range(1000)])
    lsh.add_many(list(range(1000)), batch)
    live.update({i: batch[i] for i in range(1000)})
    for i in range(1000, 2500):
        sig = near(i)
        lsh.add(i, sig)
        live[i] = sig
        if i % 7 == 0:  # remove an older page
            victim = int(rng.integers(0, i))
            assert lsh.remove(victim) == (victim in live)
            live.pop(victim, None)
        if i % 11 == 0:  # replace an older page's signature
            target = int(rng.integers(0, i))
            sig = near(int(rng.integers(0, 300)))
            lsh.add(target, sig)
            live[target] = sig
    assert len(lsh) == len(live)
    ids = np.array(sorted(live))
    sigs = np.stack([live[i] for i in ids])
    for qi in range(150):
        q = near(qi)
        for thr in (0.0, 0.7, 0.9):
            cand = _shares_band(q, sigs, lsh.bands, lsh.rows)
            scores = (sigs == q).mean(axis=1)
            keep = cand & (scores >= thr)
            expected = sorted(((int(i), float(s)) for i, s in zip(ids[keep], scores[keep])),
                              key=lambda t: (-t[1], t[0]))
            assert lsh.query(q, threshold=thr) == expected, (qi, thr)
    assert lsh.nbytes() >= len(live) * (4 * NUM_PERM + 12 * lsh.bands)


def test_add_many_with_a_repeated_id_keeps_one_entry():
    rng = np.random.default_rng(5)
    s = _random_sig(rng)
    lsh = MinHashLSH(threshold=0.8)
    lsh.add_many([7, 7], np.stack([s, s]))
    assert lsh.query(s) == [(7, 1.0)]
    lsh.remove(7)
    assert lsh.query(s) == []


def test_query_refuses_a_signature_of_the_wrong_length():
    rng = np.random.default_rng(6)
    s = _random_sig(rng)
    lsh = MinHashLSH(threshold=0.8)
    lsh.add(1, s)
    with pytest.raises(ConfigError):
        lsh.query(np.concatenate([s, s]), threshold=0.0)


# -- the Detector ---------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["minhash", "both"])
def test_detector_on_the_sample(sample_pages, method):
    det = Detector(method=method)
    seen_groups: set[str] = set()
    seen_urls: set[str] = set()
    near = 0
    for name, p in sample_pages.items():
        v = det.add(p.url, p.content)
        if p.url in seen_urls:  # a recapture of the same URL: a version of it, never its own duplicate
            assert v.version in ("unchanged", "changed") and v.match_url != v.url, (name, v)
            continue
        seen_urls.add(p.url)
        if p.group in seen_groups:
            assert v.status in ("exact", "near"), (name, v)
            if v.status == "near":
                near += 1
                assert "minhash" in present(v.method).split("+"), (name, v)
                assert v.score is not None and v.score >= det.threshold, (name, v)
                assert next(q.group for q in sample_pages.values() if q.url == v.match_url) == p.group
            else:
                assert v.method == "digest" and v.score == 1.0
        else:
            assert v.status == "new", (name, v)
            assert v.method is None and v.score is None
        seen_groups.add(p.group)
    assert near >= 3
    # the LSH holds one page per SimHash value (exact copies share one entry)
    assert len(present(det.lsh)) == distinct_simhashes(det) < det.store.page_count()
    # different articles of the same site are not near duplicates of each other
    for a, b in [("newyorker-teas-2019", "newyorker-quantum-crypto-2019"),
                 ("nytimes-trump-message-2016", "nytimes-nikki-haley-2018"),
                 ("politico-student-debt-2022", "politico-vp-debate-2016"),
                 ("obamawhitehouse-christmas-address-2022", "obamawhitehouse-tuition-address-2022")]:
        fa = det.fingerprint(sample_pages[a].content, sample_pages[a].url)
        fb = det.fingerprint(sample_pages[b].content, sample_pages[b].url)
        assert jaccard(present(fa.minhash).signature, present(fb.minhash).signature) < 0.2, (a, b)


def test_minhash_finds_what_simhash_misses():
    """A text with a quarter of its words replaced in one block: Jaccard of 3-shingles far
    below any threshold, so no method calls it near; and one with scattered small edits."""
    base = " ".join(f"token{i % 997}x{i}" for i in range(800))
    words = base.split()
    edited = words.copy()
    for i in range(0, 800, 80):  # 10 single-word edits: 3-shingle Jaccard about 0.93
        edited[i] = f"changed{i}"
    det = Detector(method="minhash")
    first = det.add("https://a.example/1", base)
    v = det.check("https://b.example/1", " ".join(edited))
    assert v.status == "near" and v.match_id == first.page_id and v.method == "minhash"
    assert v.score == pytest.approx(exact_jaccard(base, " ".join(edited)), abs=0.1)
    far = words[:400] + [f"other{i}" for i in range(400)]
    assert det.check("https://c.example/1", " ".join(far)).status == "new"


def test_threshold_decides(sample_pages):
    a, b = sample_pages["nytimes-nikki-haley-2018"], sample_pages["nytimes-nikki-haley-2022"]
    probe = Detector(method="minhash")
    fa, fb = probe.fingerprint(a.content, a.url), probe.fingerprint(b.content, b.url)
    j = jaccard(present(fa.minhash).signature, present(fb.minhash).signature)
    assert 0.8 <= j < 1.0
    below = Detector(method="minhash", threshold=j)
    below.add(a.url, a.content)
    assert below.check("https://x.example/nikki", b.content).status == "near"
    above = Detector(method="minhash", threshold=min(1.0, j + 1 / NUM_PERM))
    above.add(a.url, a.content)
    assert above.check("https://x.example/nikki", b.content).status == "new"


def test_containment_reports_partial_copies(sample_pages):
    long_page = sample_pages["nytimes-nikki-haley-2018"]
    det = Detector(method="minhash", containment=0.8)
    full = det.add(long_page.url, long_page.content)
    words = det.fingerprint(long_page.content, long_page.url).text.split()
    excerpt = " ".join(words[: len(words) // 2])
    assert 0.3 <= exact_jaccard(excerpt, " ".join(words)) < 0.8  # not a near duplicate
    v = det.check("https://excerpt.example/nikki", excerpt)
    assert v.status == "partial", v
    assert v.match_url == long_page.url and v.match_id == full.page_id
    assert v.method == "minhash" and present(v.score) >= 0.8
    assert not v.is_duplicate
    added = det.add("https://excerpt.example/nikki", excerpt)
    assert added.status == "partial" and added.match_url == long_page.url
    # it keeps a cluster of its own, and the long page stays alone in its cluster
    assert added.cluster_id is not None and added.cluster_id != full.cluster_id
    assert [r.url for r in det.cluster(present(full.cluster_id))] == [long_page.url]
    assert [r.url for r in det.cluster(added.cluster_id)] == ["https://excerpt.example/nikki"]
    # the long page is not "partial" of the shorter stored excerpt
    assert det.check("https://other.example/nikki", long_page.content).status == "exact"
    assert det.check("https://other.example/nikki2", " ".join(words[:-5])).status == "near"
    # without containment the excerpt is simply new
    plain = Detector(method="minhash")
    plain.add(long_page.url, long_page.content)
    assert plain.check("https://excerpt.example/nikki", excerpt).status == "new"


def test_containment_needs_the_longer_page_stored(sample_pages):
    long_page = sample_pages["nytimes-nikki-haley-2018"]
    det = Detector(method="minhash", containment=0.8)
    words = det.fingerprint(long_page.content, long_page.url).text.split()
    det.add("https://excerpt.example/nikki", " ".join(words[: len(words) // 2]))
    assert det.check(long_page.url, long_page.content).status == "new"


def _probe_all(det: Detector, sample_pages) -> list:
    return [det.check(f"https://probe.example/{name}", p.content) for name, p in sample_pages.items()]


def test_minhash_store_persists(tmp_path, sample_pages):
    path = tmp_path / "s.db"
    with Detector.open(path, method="minhash") as det:
        det.add_many([Page(p.url, p.content) for p in sample_pages.values()])
        before = _probe_all(det, sample_pages)
        n_lsh = len(present(det.lsh))
        sig_of = {pid: present(det.lsh).signature_of(pid) for pid in det.store.signatures()[0].tolist()}
    assert any(v.status == "near" for v in before)
    con = sqlite3.connect(path)
    try:
        stored = con.execute("SELECT count(*) FROM pages WHERE signature IS NOT NULL AND length(signature) = ?",
                             (4 * NUM_PERM,)).fetchone()[0]
    finally:
        con.close()
    assert stored == len({p.url for p in sample_pages.values()})  # recaptures share URLs
    with Detector.open(path, method="minhash") as det:
        assert n_lsh == distinct_simhashes(det)  # one LSH entry per SimHash value
        assert det.config.minhash == MinHashConfig()
        assert len(present(det.lsh)) == n_lsh
        assert all(np.array_equal(present(present(det.lsh).signature_of(pid)), present(sig))
                   for pid, sig in sig_of.items())
        assert _probe_all(det, sample_pages) == before
    # the same store also serves method 'both' and plain SimHash
    with Detector.open(path, method="both") as det:
        assert [v.status for v in _probe_all(det, sample_pages)] == [v.status for v in before]
    with Detector.open(path) as det:
        assert det.method == "simhash" and det.lsh is not None


def test_simhash_only_store_refuses_minhash(tmp_path, sample_pages):
    path = tmp_path / "s.db"
    p = sample_pages["newyorker-teas-2019"]
    with Detector.open(path) as det:
        det.add(p.url, p.content)
        assert det.config.minhash is None and det.lsh is None
    with pytest.raises(SpecMismatchError) as exc:
        Detector.open(path, method="minhash")
    assert str(path) in str(exc.value)
    with pytest.raises(SpecMismatchError):
        Detector.open(path, method="both")
    with pytest.raises(SpecMismatchError):
        Detector.open(path, containment=0.8)
    with Detector.open(path) as det:  # untouched
        again = det.check(p.url, p.content)
        assert (again.status, again.version) == ("new", "unchanged")
    # an empty SimHash store may still take signatures
    empty = tmp_path / "empty.db"
    Detector.open(empty).close()
    with Detector.open(empty, method="minhash") as det:
        assert det.config.minhash == MinHashConfig()


def test_bad_arguments_raise_config_error():
    with pytest.raises(ConfigError):
        Detector(method="minhash", threshold=0)
    with pytest.raises(ConfigError):
        Detector(method="minhash", threshold=1.5)
    with pytest.raises(ConfigError):
        Detector(method="foo")
    with pytest.raises(ConfigError):
        Detector(method="minhash", containment=0)
    with pytest.raises(ConfigError):
        Detector(method="minhash", config=FingerprintConfig())  # explicitly without signatures
    with pytest.raises(ConfigError):
        MinHashConfig(num_perm=4)
    with pytest.raises(ConfigError):
        MinHashConfig(num_perm=8192)
    with pytest.raises(ConfigError):
        MinHashConfig(seed=-1)
    with pytest.raises(ConfigError):
        MinHashLSH(MinHashConfig(), bands=20, rows=10)  # 200 > 128
    with pytest.raises(ConfigError):
        MinHashLSH(MinHashConfig(), bands=16)  # rows missing
    with pytest.raises(ConfigError):
        MinHashLSH(MinHashConfig(), threshold=1.5)
    with pytest.raises(ConfigError):
        optimal_bands(0.0, 128)
    with pytest.raises(ConfigError):
        jaccard(np.zeros(128, np.uint32), np.zeros(64, np.uint32))
    lsh = MinHashLSH()
    with pytest.raises(ConfigError):
        lsh.query(np.zeros(128, np.uint32), by="cosine")
    with pytest.raises(ConfigError):
        lsh.add_many([1, 2], np.zeros((3, 128), np.uint32))
    with pytest.raises(ConfigError):
        FingerprintConfig(minhash=MinHashConfig(features=FeatureConfig(scheme="bogus")))


def test_containment_estimate():
    assert containment(0.25, 100, 400) == pytest.approx(1.0)
    assert containment(0.0, 100, 400) == 0.0
    assert containment(0.5, 0, 10) == 0.0
    assert containment(1.0, 100, 100) == 1.0
    # A = 100 features, B = 200, 50 shared: J = 50/250, containment of A in B = 0.5
    assert containment(0.2, 100, 200) == pytest.approx(0.5)


# -- rollback keeps the LSH in step ------------------------------------------------------------

def _lsh_matches_store(det: Detector) -> None:
    ids, blobs, _ = det.store.signatures()
    assert len(present(det.lsh)) == len(ids)
    for pid, blob in zip(ids.tolist(), blobs):
        assert np.array_equal(present(present(det.lsh).signature_of(pid)), np.frombuffer(blob, dtype="<u4")), pid


def _failing_writes(det: Detector, sample_pages, monkeypatch, stored_url: str) -> None:
    """Three writes that fail half-way and are rolled back: a re-fetch of ``stored_url`` with
    other content, a brand-new page, and a batch."""
    teas, debt = sample_pages["newyorker-teas-2019"], sample_pages["politico-student-debt-2022"]
    nikki19 = sample_pages["nytimes-nikki-haley-2019"]
    with monkeypatch.context() as m:
        explode_on_cluster_update(det, m)
        with pytest.raises(Boom):
            det.add(stored_url, teas.content)
        with pytest.raises(Boom):
            det.add(debt.url, debt.content)
        with pytest.raises(Boom):
            det.add_many([(teas.url, teas.content), (nikki19.url, nikki19.content)])


def _still_finds_the_stored_article(det: Detector, sample_pages, first) -> None:
    _lsh_matches_store(det)
    assert present(det.page(first.page_id)).digest == first.digest
    # the stored page still has the Nikki Haley article: teas is not a duplicate of it
    v = det.check("https://other.example/teas", sample_pages["newyorker-teas-2019"].content)
    assert v.status == "new", v
    c = det.check("https://other.example/nikki", sample_pages["nytimes-nikki-haley-2019"].content)
    assert c.status == "near" and c.match_id == first.page_id and "minhash" in present(c.method), c
    assert det.check("https://other.example/debt", sample_pages["politico-student-debt-2022"].content).status == "new"


@pytest.mark.parametrize("method", ["minhash", "both"])
def test_failed_add_leaves_the_lsh_consistent(sample_pages, monkeypatch, method):
    """Rolled-back writes leave the LSH as it was (a store of several pages)."""
    det = Detector(method=method)
    nikki, cnbc = sample_pages["nytimes-nikki-haley-2018"], sample_pages["cnbc-cybersecurity-2019"]
    first = det.add(nikki.url, nikki.content)
    det.add(cnbc.url, cnbc.content)
    _failing_writes(det, sample_pages, monkeypatch, nikki.url)
    assert det.store.page_count() == 2
    _still_finds_the_stored_article(det, sample_pages, first)


@pytest.mark.parametrize("method", ["minhash", "both"])
def test_failed_add_leaves_the_lsh_consistent_with_one_stored_page(sample_pages, monkeypatch, method):
    """The mirror of test_store.test_failed_add_leaves_the_index_consistent: one stored page,
    re-fetched with other content and rolled back (the LSH is empty during the undo)."""
    det = Detector(method=method)
    nikki = sample_pages["nytimes-nikki-haley-2018"]
    first = det.add(nikki.url, nikki.content)
    _failing_writes(det, sample_pages, monkeypatch, nikki.url)
    assert det.store.page_count() == 1
    _still_finds_the_stored_article(det, sample_pages, first)


def test_failed_add_then_reopen_is_consistent(tmp_path, sample_pages, monkeypatch):
    path = tmp_path / "s.db"
    nikki, teas = sample_pages["nytimes-nikki-haley-2018"], sample_pages["newyorker-teas-2019"]
    with Detector.open(path, method="minhash") as det:
        first = det.add(nikki.url, nikki.content)
        det.add(sample_pages["cnbc-cybersecurity-2019"].url, sample_pages["cnbc-cybersecurity-2019"].content)
        with monkeypatch.context() as m:
            explode_on_cluster_update(det, m)
            with pytest.raises(Boom):
                det.add(nikki.url, teas.content)
        det.add(sample_pages["politico-student-debt-2022"].url, sample_pages["politico-student-debt-2022"].content)
        live = det.check("https://other.example/nikki", sample_pages["nytimes-nikki-haley-2019"].content)
        _lsh_matches_store(det)
    with Detector.open(path, method="minhash") as det:
        _lsh_matches_store(det)
        assert det.check("https://other.example/teas", teas.content).status == "new"
        again = det.check("https://other.example/nikki", sample_pages["nytimes-nikki-haley-2019"].content)
        assert again == live and again.status == "near" and again.match_id == first.page_id


def test_expire_removes_from_the_lsh(sample_pages):
    det = Detector(method="minhash")
    old = sample_pages["nytimes-nikki-haley-2018"]
    det.add(old.url, old.content, fetched_at=1_000_000.0)
    assert det.check("https://x.example/n", sample_pages["nytimes-nikki-haley-2019"].content).status == "near"
    assert det.expire(older_than=3600) == 1
    assert len(present(det.lsh)) == 0
    assert det.check("https://x.example/n", sample_pages["nytimes-nikki-haley-2019"].content).status == "new"


def distinct_simhashes(det: Detector) -> int:
    """How many SimHash values the non-empty stored pages have (the index and the LSH keep
    one page per value)."""
    sql = "SELECT count(DISTINCT simhash) FROM pages WHERE status != 'empty'"
    return int(sql_store(det.store)._exec(sql).fetchone()[0])


# -- schema migration ---------------------------------------------------------------------------

def test_v1_store_is_migrated_to_v2(tmp_path, sample_pages):
    """A store written before MinHash (schema 1: no signature columns) opens, is migrated in
    place, and its pages are still found."""
    path = tmp_path / "v1.db"
    page = sample_pages["nytimes-nikki-haley-2018"]
    config = neardup.DEFAULT_CONFIG
    fp = neardup.fingerprint(page.content, page.url, config=config)
    v1_config = {k: v for k, v in config.to_dict().items() if k != "minhash"}  # as version 1 wrote it
    write_legacy_store(path, 1, v1_config, fp, page.url, "nytimes.com")
    con = sqlite3.connect(path)
    try:
        assert "signature" not in [r[1] for r in con.execute("PRAGMA table_info(pages)")]
    finally:
        con.close()
    s = neardup.SQLiteStore(path)  # migrates
    try:
        rec = s.page_by_url(page.url)
        assert rec is not None and rec.id == 1 and rec.digest == fp.digest and rec.simhash == fp.simhash
        assert rec.signature is None and rec.set_size is None
    finally:
        s.close()
    con = sqlite3.connect(path)
    try:
        assert con.execute("PRAGMA user_version").fetchone()[0] == store_mod.SCHEMA_VERSION >= 2
        columns = [r[1] for r in con.execute("PRAGMA table_info(pages)")]
        assert {"signature", "set_size"} <= set(columns)
        assert con.execute("SELECT count(*) FROM pages").fetchone()[0] == 1
    finally:
        con.close()
    with Detector.open(path) as det:
        assert det.store.page_count() == 1
        assert det.check("https://other.example/nikki", page.content).status == "exact"
        v = det.check("https://other.example/nikki", sample_pages["nytimes-nikki-haley-2019"].content)
        assert v.status == "near" and v.match_id == 1
        teas = sample_pages["newyorker-teas-2019"]
        assert det.add(teas.url, teas.content).status == "new"
    # its pages have no signatures: MinHash is refused rather than silently missing them
    with pytest.raises(SpecMismatchError):
        Detector.open(path, method="minhash")
    with Detector.open(path) as det:
        assert det.store.page_count() == 2


# -- bounded growth: removed rows are reclaimed (issue 12) ------------------------------------

def test_re_adding_one_id_keeps_the_rows_bounded():
    """5,000 re-adds of one id held 5,000 rows before; now at most RECLAIM_MIN + 1."""
    from neardup.index.lsh import RECLAIM_MIN

    rng = np.random.default_rng(5)
    lsh = MinHashLSH(threshold=0.7, delta_limit=256)
    other = rng.integers(0, 2**32, NUM_PERM, dtype=np.uint32)
    lsh.add(2, other)
    most = 0
    for _ in range(5000):
        sig = rng.integers(0, 2**32, NUM_PERM, dtype=np.uint32)
        lsh.add(1, sig)
        most = max(most, lsh.held_rows)
    assert len(lsh) == 2 and most <= RECLAIM_MIN + 2 and lsh.held_rows <= RECLAIM_MIN + 2
    assert lsh.nbytes() <= (RECLAIM_MIN + 2) * (4 * NUM_PERM + 17) + (RECLAIM_MIN + 2) * lsh.bands * 12
    assert lsh.query(sig, threshold=0.99) == [(1, 1.0)]
    assert lsh.query(other, threshold=0.99) == [(2, 1.0)]


def test_lsh_under_churn_matches_brute_force_and_stays_bounded():
    """Random adds, removes and replacements around a small live set: after every step the
    rows held stay under 2 x live + RECLAIM_MIN + 1, and queries equal brute force."""
    from neardup.index.lsh import RECLAIM_MIN

    rng = np.random.default_rng(23)
    lsh = MinHashLSH(threshold=0.6, delta_limit=32)
    base = rng.integers(0, 2**32, (40, NUM_PERM), dtype=np.uint32)
    live: dict[int, np.ndarray] = {}
    for step in range(3000):
        pid = int(rng.integers(0, 60))
        if rng.random() < 0.35:
            assert lsh.remove(pid) == (pid in live)
            live.pop(pid, None)
        else:
            sig = base[int(rng.integers(0, 40))].copy()
            flip = rng.random(NUM_PERM) < 0.2
            sig[flip] = rng.integers(0, 2**32, int(flip.sum()), dtype=np.uint32)
            lsh.add(pid, sig)
            live[pid] = sig
        assert len(lsh) == len(live)
        assert lsh.held_rows <= 2 * len(live) + RECLAIM_MIN + 1, step
        if step % 250 == 0 and live:
            ids = np.array(sorted(live))
            sigs = np.stack([live[i] for i in ids])
            for q in base[:10]:
                cand = _shares_band(q, sigs, lsh.bands, lsh.rows)
                scores = (sigs == q).mean(axis=1)
                keep = cand & (scores >= 0.6)
                expected = sorted(((int(i), float(s)) for i, s in zip(ids[keep], scores[keep])),
                                  key=lambda t: (-t[1], t[0]))
                assert lsh.query(q, threshold=0.6) == expected, step


def test_signature_bytes_of_the_wrong_length_are_refused():
    from neardup.errors import ConfigError as CE
    from neardup.fingerprint.minhash import signatures_from_bytes

    sig = minhash_text(ENGLISH)
    with pytest.raises(CE, match="expected 512"):
        MinHashSignature.from_bytes(sig.to_bytes()[:-4], sig.set_size, sig.spec, num_perm=NUM_PERM)
    with pytest.raises(CE, match="4 per permutation"):
        signatures_from_bytes([b"abc"])
    assert signatures_from_bytes([], 8).shape == (0, 8)
    many = signatures_from_bytes([sig.to_bytes()] * 3, NUM_PERM)
    assert many.shape == (3, NUM_PERM) and (many == sig.signature).all()
