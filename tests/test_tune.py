"""neardup.tune: labelled pairs -> precision/recall per threshold, recommendation, apply."""

from __future__ import annotations

import csv
import json
import os
import random
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from checks import present
from click.testing import CliRunner

from neardup import Detector
from neardup.cli.tools import tune_cmd
from neardup.errors import NeardupError
from neardup.fingerprint.core import DEFAULT_CONFIG, FingerprintConfig
from neardup.fingerprint.minhash import MinHashConfig
from neardup.matching import match, pair_rule
from neardup.model import DEFAULT_K, default_k
from neardup.tune import sweep as tune
from neardup.tune import view as tune_view

CORPUS = Path(os.environ.get("NEARDUP_CORPUS", Path(__file__).resolve().parents[2] / "shared" / "corpus"))
WORDS = [f"w{i}" for i in range(5000)]


def article(seed: int, n: int = 300) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n))


def edited(text: str, seed: int, changes: int) -> str:
    rng = random.Random(seed)
    words = text.split()
    for _ in range(changes):
        words[rng.randrange(len(words))] = rng.choice(WORDS)
    return " ".join(words)


def write_pairs(path: Path, n_same: int = 12, n_diff: int = 12, host: str | None = None) -> Path:
    rows = []
    for i in range(n_same):
        base = article(i)
        rows.append({"id": f"s{i}", "a": "text:" + base, "b": "text:" + edited(base, 100 + i, 3 + 4 * i),
                     "label": "same"})
    for i in range(n_diff):
        rows.append({"id": f"d{i}", "a": "text:" + article(1000 + i), "b": "text:" + article(2000 + i),
                     "label": "different"})
    with path.open("w", encoding="utf-8") as fh:
        for r in rows:
            if host:
                r["host"] = host
            fh.write(json.dumps(r) + "\n")
    return path


def test_jsonl_inline_pairs_grid_and_recommendation(tmp_path):
    result = tune.tune(write_pairs(tmp_path / "pairs.jsonl"))
    assert len(result.facts) == 24 and int(result.facts.same.sum()) == 12
    assert set(k for k, _ in result.points) == set(range(22))  # k = 0..20 and the margin k = 21
    c = result.choice
    assert c.met and c.precision >= 0.99 and c.recall > 0.5
    # monotone: a looser k never loses recall
    recalls = [p.recall for p in result.table()]
    assert recalls == sorted(recalls)
    # the margin: one step looser in k and in verify keeps the precision too
    assert result.points[(present(c.k) + 1, present(c.verify))].precision >= 0.99
    d = result.to_dict()
    assert d["recommended"]["k"] == c.k and d["pairs"] == 24


def test_grid_is_the_match_rule(tmp_path):
    """The vectorised grid is matching.pair_rule, with the sketch bands (the default) and
    without them (then matching.match alone)."""
    pf = tune.load_pairs(write_pairs(tmp_path / "pairs.jsonl"))
    source = tune.PageSource()
    for bands in (True, False):
        facts = tune.pair_facts(pf.pairs, source, bands)
        beyond_k = 0
        for k in (0, 3, 5, 12, 20):
            for v in (0.0, 0.3, 0.7):
                declared = facts.declared(k, v)
                for i, p in enumerate(pf.pairs):
                    a, b = source.page(p.a).side, source.page(p.b).side
                    got = pair_rule(a, b, k, v, bands).status is not None
                    assert got == bool(declared[i])
                    if not bands:
                        assert got == (match(a, b, k, v).status is not None)
                    beyond_k += got and (a.simhash ^ b.simhash).bit_count() > k
        assert (beyond_k > 0) == bands  # the bands bring pairs beyond k, and only they do


def test_tsv_and_csv_with_files_and_urls(tmp_path):
    (tmp_path / "pages").mkdir()
    a, b, c = article(1), edited(article(1), 5, 4), article(2)
    (tmp_path / "pages" / "a.txt").write_text(a)
    (tmp_path / "pages" / "b.txt").write_text(b)
    (tmp_path / "pages" / "c.html").write_text(f"<html><body><article><p>{c}</p></article></body></html>")
    tsv = tmp_path / "p.tsv"
    tsv.write_text("a\tb\tlabel\turl_a\turl_b\n"
                   "pages/a.txt\tpages/b.txt\tsame\thttps://x.example/1\thttps://x.example/2\n"
                   "pages/a.txt\tpages/c.html\tdifferent\thttps://x.example/1\thttps://x.example/3\n"
                   "pages/a.txt\tpages/c.html\tunclear\t\t\n")
    pf = tune.load_pairs(tsv)
    assert len(pf.pairs) == 2 and pf.skipped == {"unclear": 1}
    assert pf.pairs[0].host == "x.example"
    res = tune.tune(pf)
    assert res.choice.recall == 1.0 and res.choice.precision == 1.0
    # the same pages as URLs of a store
    det = Detector.open(tmp_path / "s.db")
    det.add("https://x.example/1", a, headers={"Content-Type": "text/plain"})
    det.add("https://x.example/2", b, headers={"Content-Type": "text/plain"})
    det.add("https://x.example/3", c, headers={"Content-Type": "text/plain"})
    csv_path = tmp_path / "p.csv"
    with csv_path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["a", "b", "label"])
        w.writerow(["https://x.example/1", "https://x.example/2", "yes"])
        w.writerow(["https://x.example/1", "https://x.example/3", "no"])
    res2 = tune.tune(csv_path, store=det.store)
    assert res2.choice.recall == 1.0 and res2.choice.precision == 1.0
    with pytest.raises(tune.PageRefError, match="give the store"):
        tune.tune(csv_path)
    det.close()


@pytest.mark.parametrize("name, content, message", [
    ("p.tsv", "a\tb\n1\t2\n", "header lacks column"),
    ("p.tsv", "a\tb\tlabel\nx\ty\tmaybe\n", "unknown label"),
    ("p.tsv", "a\tb\tlabel\nx\ty\n", "fields"),
    ("p.tsv", "", "empty file"),
    ("p.jsonl", "{bad\n", "not JSON"),
    ("p.jsonl", "[1, 2]\n", "JSON object"),
    ("p.jsonl", '{"a": "text:x", "label": "same"}\n', "missing 'b'"),
    ("p.jsonl", '{"a": {"nothing": 1}, "b": "text:y", "label": "same"}\n', "needs one of"),
    ("p.tsv", "a\tb\tlabel\nx\ty\tskip\n", "no labelled pairs"),
    ("p.xlsx", "whatever", "unknown pairs format"),
])
def test_bad_files_are_typed_one_line_errors(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(tune.PairsFormatError, match=message) as info:
        tune.load_pairs(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_missing_pairs_file_and_page(tmp_path):
    with pytest.raises(tune.PairsFormatError, match="no such file"):
        tune.load_pairs(tmp_path / "nope.tsv")
    p = tmp_path / "p.tsv"
    p.write_text("a\tb\tlabel\nmissing.html\tother.html\tsame\n")
    with pytest.raises(tune.PageRefError, match="does not exist"):
        tune.tune(p)


def test_per_host_recommendations_need_enough_pairs():
    rng = np.random.default_rng(0)
    n = 56
    same = np.array([i % 2 == 0 for i in range(n)])
    # host a: duplicates within 6 bits, different pages from 9 bits; host b: looser duplicates
    dist = np.where(same, rng.integers(0, 7, n), rng.integers(9, 30, n))
    hosts = ["a.example" if i < 40 else "b.example" for i in range(n)]
    dist[40:] = np.where(same[40:], 15, 30)
    facts = tune.PairFacts.from_arrays(same=same.tolist(), distance=dist.tolist(), score=[0.9] * n, hosts=hosts)
    res = tune.tune_facts(facts, min_precision=1.0)
    assert set(res.hosts) == {"a.example"}  # b.example has 16 pairs (8 of each), a.example 40
    assert res.hosts["a.example"].k == 6 and res.hosts["a.example"].recall == 1.0
    res2 = tune.tune_facts(facts, min_precision=1.0, min_host_pairs=16)
    assert res2.hosts["b.example"].k == 15
    settings = res2.settings()
    assert settings["hosts"]["b.example"]["k"] == 15
    assert tune.thresholds_for(settings, "b.example")["k"] == 15
    assert tune.thresholds_for(settings, "c.example")["k"] == res2.choice.k


def test_ties_keep_the_default_k():
    # exact copies and unrelated pages: every k from 0 to 20 separates them perfectly
    facts = tune.PairFacts.from_arrays(same=[True] * 6 + [False] * 6, distance=[0] * 6 + [32] * 6,
                                       score=[1.0] * 6 + [0.0] * 6)
    res = tune.tune_facts(facts, min_precision=0.99)
    assert res.choice.met and res.choice.k == DEFAULT_K and res.choice.recall == 1.0
    assert tune.tune_facts(facts, preferred_k=12).choice.k == 12
    # a real optimum still wins over the default: duplicates up to 8 bits apart
    spread = tune.PairFacts.from_arrays(same=[True] * 6 + [False] * 6, distance=[0, 2, 4, 6, 8, 8] + [32] * 6,
                                        score=[1.0] * 6 + [0.0] * 6)
    assert tune.tune_facts(spread).choice.k == 8


def test_no_point_meets_the_target_falls_back_to_best_f1():
    facts = tune.PairFacts.from_arrays(same=[True, False, True, False], distance=[1, 1, 2, 2])
    res = tune.tune_facts(facts, min_precision=0.9)
    assert not res.choice.met and res.choice.point.f1 > 0


def test_minhash_thresholds_when_signatures_exist(tmp_path):
    config = DEFAULT_CONFIG.with_(minhash=MinHashConfig())
    res = tune.tune(write_pairs(tmp_path / "pairs.jsonl", 8, 8), config=config)
    assert res.minhash_points and res.minhash_choice is not None
    assert res.minhash_choice.precision == 1.0
    assert res.settings("minhash")["threshold"] == res.minhash_choice.threshold
    plain = tune.tune(write_pairs(tmp_path / "p2.jsonl", 4, 4))
    assert plain.minhash_choice is None
    with pytest.raises(NeardupError):
        plain.settings("minhash")


def test_apply_stores_the_choice(tmp_path):
    res = tune.tune(write_pairs(tmp_path / "pairs.jsonl", 6, 6))
    det = Detector.open(tmp_path / "s.db")
    stored = tune.apply(det.store, res)
    det.close()
    det = Detector.open(tmp_path / "s.db")
    got = present(tune.stored_choice(det.store))
    det.close()
    assert got == json.loads(json.dumps(stored))
    assert got["version"] == 1 and got["method"] == "simhash" and got["k"] == res.choice.k


def test_pr_curve_svg_parses(tmp_path):
    res = tune.tune(write_pairs(tmp_path / "pairs.jsonl", 6, 6))
    root = ET.fromstring(tune_view.pr_curve_svg(res))
    assert root.tag.endswith("svg") and root.get("data-plot") == "pr-curve"
    ns = "{http://www.w3.org/2000/svg}"
    assert root.findall(f"{ns}polyline") and root.findall(f".//{ns}circle[@class='mark']")


def test_within_margin():
    ok = {0: True, 1: True, 2: False}.__getitem__
    assert tune.within_margin(0, ok, lambda k: k + 1)
    assert not tune.within_margin(1, ok, lambda k: k + 1)
    assert tune.within_margin(1, ok, lambda k: None)


def test_cli_tune(tmp_path):
    pairs = write_pairs(tmp_path / "pairs.jsonl", 6, 6)
    runner = CliRunner()
    r = runner.invoke(tune_cmd, [str(pairs), "--out", str(tmp_path / "pr.svg")])
    assert r.exit_code == 0, r.output
    assert "recommended: k=" in r.output and (tmp_path / "pr.svg").read_text().startswith("<?xml")
    r = runner.invoke(tune_cmd, [str(pairs), "--json", "--verify", "0.3"])
    assert r.exit_code == 0 and json.loads(r.stdout)["recommended"]["verify"] == 0.3
    r = runner.invoke(tune_cmd, [str(pairs), "--apply"])
    assert r.exit_code == 2
    db = tmp_path / "s.db"
    Detector.open(db).close()
    r = runner.invoke(tune_cmd, [str(pairs), "--db", str(db), "--apply", "--force"])
    assert r.exit_code == 0 and "stored in" in r.output
    bad = tmp_path / "bad.tsv"
    bad.write_text("x\ty\n")
    r = runner.invoke(tune_cmd, [str(bad)])
    assert r.exit_code == 1 and r.output.count("\n") == 1 and "neardup: error:" in r.output


@pytest.mark.skipif(not (CORPUS / "near-dup-pairs" / "pairs.tsv").is_file(), reason="needs ../shared/corpus")
def test_development_pairs_reproduce_the_harness_k(tmp_path):
    """pairs.tsv through the generic format: same-content = same, the negatives = different
    (what benchmarks/quality.py scores); no false positive allowed and verify at the default:
    the recommended k is the one the harness chose (the Detector default)."""
    mapping = {"same-content": "same", "shared-boilerplate-only": "different", "different-content": "different"}
    out = tmp_path / "pairs.tsv"
    with (CORPUS / "near-dup-pairs" / "pairs.tsv").open(encoding="utf-8") as fh, out.open("w") as w:
        w.write("id\ta\tb\tlabel\turl_a\turl_b\n")
        for r in csv.DictReader(fh, delimiter="\t"):
            if r["label"] in mapping:
                w.write(f"{r['pair_id']}\t{CORPUS / r['a']}\t{CORPUS / r['b']}\t{mapping[r['label']]}\t"
                        f"{r['url_a']}\t{r['url_b']}\n")
    # the harness's SimHash-only default: the accurate extractor (docs/quality.md, Recommended default)
    res = tune.tune(out, min_precision=1.0, verifies=(0.3,), config=FingerprintConfig(extractor="accurate"),
                    bands=False)
    assert res.choice.met and res.choice.k == default_k(bands=False) == 12
    assert res.choice.precision == 1.0 and round(res.choice.recall, 3) == 0.974  # 111 of 114, docs/quality.md
    # the default rule (hybrid, k = 3 and the bands): all 114, no negative (docs/quality.md, product rule)
    res = tune.tune(out, min_precision=1.0, verifies=(0.3,))
    d = present(res.defaults)
    assert res.default_k == DEFAULT_K == 3 and (d.tp, d.fn, d.fp) == (114, 0, 0)


def test_wilson_intervals():
    assert tune.wilson(0, 0) == (0.0, 1.0)
    lo, hi = tune.wilson(30, 30)
    assert hi == 1.0 and 0.88 < lo < 0.89
    lo, hi = tune.wilson(50, 100)
    assert lo == pytest.approx(1 - hi) and 0.40 < lo < 0.41
    # narrower with more pairs
    assert tune.wilson(300, 300)[0] > tune.wilson(30, 30)[0]


def test_too_few_pairs_warn_and_refuse_apply(tmp_path):
    pairs = write_pairs(tmp_path / "pairs.jsonl", 8, 8)
    db = tmp_path / "s.db"
    Detector.open(db).close()
    runner = CliRunner()
    r = runner.invoke(tune_cmd, [str(pairs), "--db", str(db), "--apply"])
    assert r.exit_code == 1 and "not applied" in r.output and "8 same and 8 different" in r.output
    with Detector.open(db) as det:
        assert tune.stored_choice(det.store) is None
    r = runner.invoke(tune_cmd, [str(pairs), "--json"])
    got = json.loads(r.stdout)
    assert r.exit_code == 0 and "fewer than 30 of each" in got["warning"] and "warning:" in r.stderr
    lo, hi = got["recommended"]["precision_ci"]
    assert 0 < lo < got["recommended"]["precision"] <= hi <= 1
    r = runner.invoke(tune_cmd, [str(pairs), "--min-pairs", "8", "--db", str(db), "--apply"])
    assert r.exit_code == 0 and "stored in" in r.output and "warning" not in r.output
    r = runner.invoke(tune_cmd, [str(pairs), "--min-pairs", "9"])
    assert "95% CI" in r.stdout and "warning: only 8 same" in r.stdout


def test_pr_curve_labels_k_and_gives_legend_values(tmp_path):
    res = tune.tune(write_pairs(tmp_path / "pairs.jsonl", 12, 12), bands=False)  # a curve over k
    root = ET.fromstring(tune_view.pr_curve_svg(res))
    ns = "{http://www.w3.org/2000/svg}"
    texts = ["".join(t.itertext()) for t in root.iter(f"{ns}text")]
    assert any(t.startswith("k=") for t in texts)
    assert any(t.startswith(f"recommended {res.choice.point.label()}") for t in texts)
    for g in root.iter(f"{ns}g"):
        if g.get("class") == "legend-entry":
            assert "".join(g.itertext()).strip().endswith(present(g.get("data-value")))
    assert any("Too few pairs" in t for t in texts)  # 12 of each
    assert root.findall(f"{ns}line[@class='error-bar']")
