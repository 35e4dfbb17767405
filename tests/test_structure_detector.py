"""Structure fingerprints through the Detector: the soft-404 flag at add time, templates and
redesigns in the host signals, the structure stored and printed (issue 23)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from neardup import Detector
from neardup.cli.main import main

ERROR_SHELL = ("<html><head><title>Not found</title></head><body><div class='site'><nav class='menu'>"
               "<a href='/'>Home</a><a href='/news'>News</a></nav><main class='error'><h1>Sorry</h1>"
               "<p>The page you asked for is not here any more. Try the search.</p></main>"
               "<footer class='foot'>Example Press</footer></div></body></html>")


def article(i: int, layout: str = "old") -> str:
    words = " ".join(f"story{i}word{j}" for j in range(250))
    if layout == "old":
        return (f"<html><head><title>Story {i}</title></head><body><table class='layout'><tr><td class='nav'>"
                f"<a href='/'>Home</a></td><td class='content'><h1>Story {i}</h1><p>{words}</p></td></tr>"
                "</table></body></html>")
    return (f"<html><head><title>Story {i}</title></head><body><header class='top'><nav class='menu'>"
            f"<a href='/'>Home</a></nav></header><main><article class='story'><h1>Story {i}</h1>"
            f"<section class='body'><p>{words}</p></section></article></main><aside class='related'>"
            "<ul><li>a</li><li>b</li></ul></aside><footer class='bottom'>c</footer></body></html>")


def test_the_error_template_is_flagged_once_it_repeats():
    det = Detector()
    flags = [det.add(f"https://press.example/gone/{i}", ERROR_SHELL, fetched_at=1000.0 + i).flag for i in range(6)]
    assert flags[:2] == [None, None] and set(flags[2:]) == {"soft-404"}
    assert det.add("https://press.example/story", article(1), fetched_at=2000.0).flag is None
    (row,) = det.hosts()
    assert row["soft_404s"] == 4 and row["templates"]["count"] >= 2


def test_a_redesign_is_found_when_the_host_moves_for_good():
    det = Detector()
    t = 0.0
    for i in range(20):
        t += 3600.0
        det.add(f"https://news.example/{i}", article(i, "old"), fetched_at=t)
    for i in range(20, 40):
        t += 3600.0
        det.add(f"https://news.example/{i}", article(i, "new"), fetched_at=t)
    row = det.host("news.example")
    assert row is not None and row["templates"]["count"] == 2
    assert len(row["redesigns"]) == 1 and row["redesigns"][0]["at"] > 20 * 3600.0


def test_the_structure_is_stored_and_printed(tmp_path: Path):
    det = Detector.open(tmp_path / "s.db")
    v = det.add("https://news.example/1", article(1))
    assert v.page_id is not None
    rec = det.page(v.page_id)
    assert rec is not None and rec.structure is not None
    assert rec.structure == det.fingerprint(article(1), "https://news.example/1").structure
    det.close()
    page = tmp_path / "p.html"
    page.write_text(article(1), encoding="utf-8")
    out = CliRunner().invoke(main, ["fingerprint", str(page)])
    assert out.exit_code == 0 and json.loads(out.output)["structure"] == f"{rec.structure:016x}"


def test_the_report_shows_templates_and_redesigns(tmp_path: Path):
    from neardup.report.html_report import write_report

    det = Detector.open(tmp_path / "s.db")
    t = 1.7e9
    for i in range(40):
        t += 3600.0
        det.add(f"https://news.example/{i}", article(i, "old" if i < 20 else "new"), fetched_at=t)
    t += 3600.0
    updated = article(3, "new").replace("</p>", " with an update to the story</p>", 1)
    assert det.add("https://news.example/3", updated, fetched_at=t).version == "changed"  # a change after it
    det.close()
    data = write_report(tmp_path / "s.db", tmp_path / "r.html")
    (row,) = data.structure
    assert (row["host"], row["templates"], len(row["redesigns"])) == ("news.example", 2, 1)
    assert row["changes_after"] == 1 and row["changes_before"] == 0
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert 'id="templates"' in html and "news.example" in html.split('id="templates"')[1]
