"""Hostile and malformed input through the library: a typed error or a clean verdict, never
another exception (issue 11). The fuzz harness (benchmarks/fuzz.py) found most of these."""

from __future__ import annotations

from typing import Any

import pytest
from checks import present

import neardup
from neardup import FingerprintConfig
from neardup.errors import NeardupError, URLError
from neardup.fingerprint.extract import EXTRACTORS
from neardup.urls import validate_url


@pytest.mark.parametrize("url", ["https://example.com/\ud800", "https://ex\udfffample.com/", "http://a.b/?q=\udc80"])
def test_url_with_lone_surrogate_is_a_url_error(url):
    with pytest.raises(URLError, match="surrogate"):
        validate_url(url)


def test_detector_refuses_surrogate_url_and_keeps_going(sample_pages):
    page = sample_pages["cnbc-cybersecurity-2019"]
    with neardup.Detector() as det:
        with pytest.raises(URLError):
            det.add("https://example.com/\ud800", page.content)
        verdicts = det.add_many([neardup.Page("https://example.com/\ud800", page.content),
                                 neardup.Page(page.url, page.content)])
        assert [v.status for v in verdicts] == ["error", "new"]
        assert "surrogate" in present(verdicts[0].error)


@pytest.mark.parametrize("extractor", EXTRACTORS)
def test_surrogates_everywhere_in_str_html(sample_pages, extractor):
    html = sample_pages["cnbc-cybersecurity-2019"].content.decode("utf-8", "replace")
    html = html.replace("<title>", "<title>\ud800", 1)
    html = html.replace('rel="canonical" href="', 'rel="canonical" href="/\udc00', 1)
    with neardup.Detector(config=FingerprintConfig(extractor=extractor)) as det:
        verdict = det.add("https://www.cnbc.com/a", html)
        assert verdict.status == "new"
        assert "\ud800" not in (verdict.title or "")


@pytest.mark.parametrize("charset", ["undefined", "punycode", "idna", "unicode_escape", "utf-7"])
def test_bogus_charset_header_through_detector(sample_pages, charset):
    page = sample_pages["cnbc-cybersecurity-2019"]
    with neardup.Detector() as det:
        v = det.add(page.url, page.content, {"Content-Type": f"text/html; charset={charset}"})
        assert v.status == "new"


def test_untyped_extractor_failure_becomes_input_error(monkeypatch):
    from neardup.fingerprint import extract as ex

    def boom(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(ex, "extract_plain_text", boom)
    with pytest.raises(neardup.InputError, match="fast extractor failed.*RecursionError") as info:
        neardup.fingerprint("<html><body><p>words</p></body></html>", config=FingerprintConfig(extractor="fast"))
    assert isinstance(info.value, NeardupError) and "\n" not in str(info.value)


def test_formatting_element_soup_does_not_multiply_elements(sample_pages):
    """Found by benchmarks/fuzz.py (seed 1, case 212): thousands of distinct unclosed <b>
    before many paragraphs made Lexbor re-open every one of them per paragraph (55 KB of
    HTML became 6 million elements: 2.4 GB). Such formatting tags are dropped before parsing."""
    from neardup.fingerprint.extract import extract_main_content

    soup = "".join(f"<b a={i}>" for i in range(3000)) + "<p>x</p>" * 2000
    html = sample_pages["cnbc-cybersecurity-2019"].content.decode("utf-8", "replace")
    html = html.replace("</body>", soup + "</body>", 1)
    sentence = "The aggressive tactics come as the cybersecurity market expands dramatically"
    for extractor in EXTRACTORS:
        ext = extract_main_content(html, extractor=extractor)
        assert "formatting tags dropped" in present(ext.fallback)
        assert sentence in " ".join(ext.text.split())


def test_fuzz_smoke():
    """A short run of the fuzz harness: no untyped exception, no 5xx, nothing slow."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "fuzz.py"
    spec = present(importlib.util.spec_from_file_location("neardup_fuzz", path))
    fuzz: Any = importlib.util.module_from_spec(spec)
    present(spec.loader).exec_module(fuzz)
    fuzz.CORPUS = Path("/nonexistent")  # the bundled sample: the same pages everywhere
    result = fuzz.fuzz(150, seed=11, slow=60.0)
    assert result["tally"]["cases"] == 150
    assert result["untyped"] == {} and result["http_bad"] == {} and result["slow"] == []
