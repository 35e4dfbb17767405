"""Decoding, main-content extraction, metadata and input checks (neardup.fingerprint.extract)."""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import random
import re

import pytest
from checks import present

import neardup
from neardup import FingerprintConfig, InputError, fingerprint
from neardup.fingerprint.extract import EXTRACTORS, extract_main_content
from neardup.fingerprint.normalize import normalize_text

WORD = re.compile(r"\w+")
ARTICLE = "cnbc-cybersecurity-2019"


def words(text: str) -> set[str]:
    return set(WORD.findall(normalize_text(text)))


def flat(text: str) -> str:
    """Whitespace-insensitive form for substring checks."""
    return " ".join(text.split())


def one_line(err: BaseException) -> bool:
    msg = str(err)
    return bool(msg.strip()) and "\n" not in msg


def article_html(body: bytes, head: bytes = b"") -> bytes:
    """A minimal page around ``body`` (lines of text become paragraphs)."""
    paras = b"".join(b"<p>" + line + b"</p>\n" for line in body.split(b"\n") if line.strip())
    return (b"<!DOCTYPE html><html><head>" + head + b"<title>t</title></head><body><article>\n"
            + paras + b"</article></body></html>")


# --------------------------------------------------------------------------- main content


def test_main_content_keeps_article_drops_boilerplate(sample_pages):
    page = sample_pages[ARTICLE]
    main = extract_main_content(page.content, page.url)
    full = extract_main_content(page.content, page.url, extractor="full")
    assert main.is_html and full.is_html
    sentence = ("The cybersecurity vendor marketplace is growing so crowded that some companies "
                "have been resorting to extreme tactics")
    assert sentence in flat(main.text)
    assert sentence in flat(full.text)
    # site navigation and footer are visible text, but not main content
    for boiler in ("Skip Navigation", "Subscribe to CNBC PRO", "Terms of Service",
                   "All Rights Reserved", "Licensing & Reprints"):
        assert boiler in full.text
        assert boiler not in main.text
    assert len(main.text) < 0.7 * len(full.text)


def test_main_content_npr(sample_pages):
    page = sample_pages["npr-dylann-roof-2022"]
    main = extract_main_content(page.content, page.url).text
    full = extract_main_content(page.content, page.url, extractor="full").text
    assert "A jury in Charleston, S.C., has found Dylann Roof guilty on all 33 counts" in flat(main)
    assert "# Jury Finds Dylann Roof Guilty In S.C. Church Shooting" in main  # heading kept
    for boiler in ("Keyboard shortcuts for audio player", "Become an NPR sponsor",
                   "Your Privacy Choices"):
        assert boiler in full
        assert boiler not in main
    assert len(main) < len(full)


def test_every_sample_page_has_main_content(sample_pages):
    for page in sample_pages.values():
        main = extract_main_content(page.content, page.url)
        full = extract_main_content(page.content, page.url, extractor="full")
        assert len(words(main.text)) > 50, page.name
        assert len(main.text) <= len(full.text), page.name
        assert not fingerprint(page.content, page.url).empty, page.name


@pytest.mark.parametrize("name", ["cnbc-cybersecurity-2019", "npr-dylann-roof-2022",
                                  "japan-cnet-apple-news-2019", "politico-vp-debate-2016"])
def test_fast_and_accurate_share_most_words(sample_pages, name):
    page = sample_pages[name]
    fast = words(extract_main_content(page.content, page.url, extractor="fast").text)
    accurate = words(extract_main_content(page.content, page.url, extractor="accurate").text)
    assert accurate and fast
    assert len(fast & accurate) / len(fast | accurate) >= 0.7
    # the accurate (trafilatura) text is nearly a subset of the fast one on these articles
    assert len(fast & accurate) / len(accurate) >= 0.9


def test_extractors_accepted_by_fingerprint_config(sample_pages):
    page = sample_pages[ARTICLE]
    fps = {ex: fingerprint(page.content, page.url, config=FingerprintConfig(extractor=ex))
           for ex in ("fast", "accurate", "full")}
    assert len({fp.spec for fp in fps.values()}) == 3
    assert all(f"extract={ex}" in fp.spec for ex, fp in fps.items())
    assert fps["full"].tokens > fps["fast"].tokens


def test_readability_gold_recall(corpus):
    """On Mozilla Readability's real test pages, the main text holds the expected article."""
    recalls = []
    with open(corpus / "readability" / "manifest.tsv", encoding="utf-8", newline="") as fh:
        rows = [r for r in csv.DictReader(fh, delimiter="\t") if r["synthetic_or_tiny"] == "no"]
    for row in rows:
        folder = corpus / "readability" / row["dir"]
        expected = extract_main_content((folder / "expected.html").read_bytes(), extractor="full").text
        gold = words(expected)
        if len(gold) < 20:
            continue
        main = words(extract_main_content(gzip.decompress((folder / "source.html.gz").read_bytes())).text)
        recalls.append(len(gold & main) / len(gold))
    assert len(recalls) >= 50
    assert sum(r >= 0.8 for r in recalls) / len(recalls) >= 0.9


def test_trafilatura_snippets(corpus):
    """trafilatura's multilingual eval pages: 'with' snippets kept, far fewer 'without' ones
    than in the full visible text."""
    base = corpus / "trafilatura"
    evaldata = json.loads((base / "evaldata.json").read_text(encoding="utf-8"))
    with open(base / "manifest.tsv", encoding="utf-8", newline="") as fh:
        rows = [r for r in csv.DictReader(fh, delimiter="\t") if r["in_evaldata"] == "yes"]
    rows = sorted(rows, key=lambda r: r["file"])[:100]
    kept = dropped_main = dropped_full = n_with = n_without = 0
    for row in rows:
        entry = evaldata[row["url"]]
        data = gzip.decompress((base / row["file"]).read_bytes())
        main = flat(extract_main_content(data, row["url"]).text)
        full = flat(extract_main_content(data, row["url"], extractor="full").text)
        for s in entry["with"]:
            n_with += 1
            kept += flat(s) in main
        for s in entry["without"]:
            n_without += 1
            dropped_main += flat(s) in main
            dropped_full += flat(s) in full
    assert n_with > 200 and n_without > 200
    assert kept / n_with >= 0.85
    assert dropped_main / n_without <= 0.4
    assert dropped_main < 0.6 * dropped_full


# --------------------------------------------------------------------------- metadata


def test_title_and_canonical_of_sample_pages(sample_pages):
    page = sample_pages[ARTICLE]
    ext = extract_main_content(page.content, page.url)
    assert ext.title == "Here's how cybersecurity vendors drive the 'hacking' news cycle"
    assert ext.canonical_url == page.url
    # a mirror copy still points at the original through rel=canonical
    mirror = sample_pages["npr-dylann-roof-2022-mirror"]
    assert "news-mirror.example.net" in mirror.url
    ext = extract_main_content(mirror.content, mirror.url)
    assert ext.canonical_url == sample_pages["npr-dylann-roof-2022"].url
    # title and canonical link do not depend on the extractor
    for extractor in EXTRACTORS:
        fp = fingerprint(mirror.content, mirror.url, config=FingerprintConfig(extractor=extractor))
        assert (fp.canonical_url, fp.title) == (ext.canonical_url, ext.title), extractor


@pytest.mark.parametrize("href, expected", [
    ("/2019/03/18/story.html", "https://www.cnbc.com/2019/03/18/story.html"),
    ("story.html", "https://www.cnbc.com/2019/03/18/story.html"),
    ("../other/x.html?a=1", "https://www.cnbc.com/2019/03/other/x.html?a=1"),
    ("//cdn.example.org/p", "https://cdn.example.org/p"),
    ("  https://example.com/abs  ", "https://example.com/abs"),
])
def test_relative_canonical_resolved_against_url(sample_pages, href, expected):
    page = sample_pages[ARTICLE]
    html = re.sub(rb'(rel="canonical" href=")[^"]*"', b"\\g<1>" + href.encode() + b'"', page.content)
    assert html != page.content
    url = "https://www.cnbc.com/2019/03/18/heres-how.html"
    for extractor in EXTRACTORS:
        assert extract_main_content(html, url, extractor=extractor).canonical_url == expected, extractor
        # without a page URL the href is returned as written (trimmed)
        assert extract_main_content(html, extractor=extractor).canonical_url == href.strip(), extractor
    assert fingerprint(html, url).canonical_url == expected


def test_canonical_rel_variants():
    body = b"<p>" + b"plenty of words in this paragraph " * 5 + b"</p>"
    for link in (b'<link rel="Canonical" href="/a">', b'<LINK REL="alternate canonical" HREF="/a">'):
        page = b"<html><head>" + link + b"</head><body>" + body + b"</body></html>"
        assert extract_main_content(page, "http://h.example/x/y").canonical_url == "http://h.example/a"
    for link in (b'<link rel="canonical" href="">', b'<link rel="canonical">',
                 b'<link rel="noncanonical" href="/a">', b""):
        page = b"<html><head>" + link + b"</head><body>" + body + b"</body></html>"
        assert extract_main_content(page, "http://h.example/x/y").canonical_url is None


def test_language(sample_pages):
    for page in sample_pages.values():
        lang = extract_main_content(page.content, page.url).language
        if page.group.startswith("japan-cnet"):
            assert lang == "ja", page.name
        else:
            assert lang == "en", page.name
        assert extract_main_content(page.content, page.url, extractor="accurate").language == lang, page.name


def test_language_of_corpus_pages(corpus):
    cases = {"eval/football.ua.podolski.html.gz": "ru", "eval/xinhuanet.com.c_1125597921.html.gz": "zh",
             "eval/nhk.or.jp.k100.html.gz": "ja", "eval/auto-presse.de-minisuv.html.gz": "de"}
    for name, lang in cases.items():
        data = gzip.decompress((corpus / "trafilatura" / name).read_bytes())
        assert extract_main_content(data).language == lang, name


def test_language_falls_back_to_html_lang():
    page = b'<html lang="pt-BR"><body><p>Ok.</p></body></html>'
    assert extract_main_content(page).language == "pt"


# --------------------------------------------------------------------------- decoding


def japanese_text(sample_pages) -> str:
    text = extract_main_content(sample_pages["japan-cnet-apple-news-2019"].content).text
    assert sum("\u3040" <= c <= "\u30ff" for c in text) > 200  # plenty of kana
    return text


def roundtrip(text: str, encoding: str) -> tuple[bytes, str]:
    """``text`` encoded (unencodable characters dropped) and what it should decode to."""
    data = text.encode(encoding, "ignore")
    return data, data.decode(encoding)


def test_http_charset_wins_over_meta(sample_pages):
    text = japanese_text(sample_pages)
    data, expected = roundtrip(text, "shift_jis")
    page = article_html(data, head=b'<meta charset="iso-8859-1">')
    ext = extract_main_content(page, headers={"Content-Type": "text/html; charset=Shift_JIS"})
    assert ext.encoding == "shift_jis"
    first = expected.splitlines()[0]
    assert flat(first) in flat(ext.text)
    # the header name is matched case-insensitively
    ext2 = extract_main_content(page, headers={"content-type": "text/html;charset=shift_jis"})
    assert ext2.text == ext.text


def test_meta_charset_used(sample_pages):
    text = japanese_text(sample_pages)
    for encoding, meta in [("shift_jis", b'<meta charset="Shift_JIS">'),
                           ("euc_jp", b'<meta http-equiv="Content-Type" content="text/html; charset=EUC-JP">')]:
        data, expected = roundtrip(text, encoding)
        ext = extract_main_content(article_html(data, head=meta))
        assert words(expected) <= words(ext.text) | {""}, encoding
        assert flat(expected.splitlines()[0]) in flat(ext.text)


def test_meta_charset_koi8r(corpus):
    data = gzip.decompress((corpus / "trafilatura" / "eval/football.ua.podolski.html.gz").read_bytes())
    text = extract_main_content(data).text
    encoded, expected = roundtrip(text, "koi8_r")
    ext = extract_main_content(article_html(encoded, head=b'<meta charset="koi8-r">'))
    assert flat(expected.splitlines()[0]) in flat(ext.text)
    assert "Подольски" in ext.text


def test_unknown_or_wrong_header_charset_falls_back(sample_pages):
    text = japanese_text(sample_pages)
    data, expected = roundtrip(text, "shift_jis")
    page = article_html(data, head=b'<meta charset="shift_jis">')
    for ctype in ("text/html; charset=no-such-charset", "text/html; charset=utf-8"):
        ext = extract_main_content(page, headers={"Content-Type": ctype})
        assert flat(expected.splitlines()[0]) in flat(ext.text), ctype


def test_detection_cp1252_shift_jis_euc_jp(sample_pages):
    english = extract_main_content(sample_pages["politico-morning-money-2022"].content).text
    assert "’" in english  # curly quotes: not ASCII
    cases = [(english, "cp1252"), (japanese_text(sample_pages), "shift_jis"),
             (japanese_text(sample_pages), "euc_jp")]
    for text, encoding in cases:
        data, expected = roundtrip(text, encoding)
        assert not data.isascii()
        # as plain text, no declaration anywhere
        ext = extract_main_content(data)
        assert not ext.is_html
        assert ext.text == expected, encoding
        # as an HTML page without any charset declaration
        ext = extract_main_content(article_html(data))
        assert flat(expected.splitlines()[0]) in flat(ext.text), encoding


@pytest.mark.parametrize("name, encoding, sample_word", [
    ("eval/xinhuanet.com.c_1125597921.html.gz", "gb2312", "新华网"),
    ("eval/football.ua.podolski.html.gz", "koi8_r", "Подольски"),
    ("eval/football.ua.podolski.html.gz", "cp1251", "Подольски"),
    ("eval/auto-presse.de-minisuv.html.gz", "cp1252", "Groß-Gerau"),
])
def test_detection_on_corpus_text(corpus, name, encoding, sample_word):
    page = gzip.decompress((corpus / "trafilatura" / name).read_bytes())
    text = extract_main_content(page).text
    data, expected = roundtrip(text, encoding)
    assert sample_word in expected
    ext = extract_main_content(data)
    assert ext.text == expected
    ext = extract_main_content(article_html(data))
    assert sample_word in ext.text
    assert flat(expected.splitlines()[0]) in flat(ext.text)


def test_real_non_utf8_page(corpus):
    """rp.pl is served as Windows-1250 (declared in a meta tag): Polish letters survive."""
    base = corpus / "trafilatura"
    evaldata = json.loads((base / "evaldata.json").read_text(encoding="utf-8"))
    url = "https://www.rp.pl/Polityka/305049888-Unijne-fundusze-coraz-blizej-Sejm-zaglosowal-za.html"
    entry = evaldata[url]
    data = gzip.decompress((base / "eval" / (entry["file"] + ".gz")).read_bytes())
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")
    ext = extract_main_content(data, url)
    assert ext.language == "pl"
    for snippet in entry["with"]:
        assert flat(snippet) in flat(ext.text)
    assert "\ufffd" not in ext.text


def test_utf8_without_declaration_is_decoded_as_utf8(sample_pages):
    """Valid UTF-8 with non-ASCII characters and no charset anywhere must not become mojibake:
    the titles and the first non-ASCII paragraph of the sample articles, as plain text and as
    small HTML pages."""
    found: set[str | None] = set()
    for page in sample_pages.values():
        ext = extract_main_content(page.content)
        found.add(ext.title)
        found.add(next((line for line in ext.text.splitlines()
                         if len(line) >= 40 and not line.isascii()), None))
    pieces = sorted({p.strip() for p in found if p and not p.isascii()})
    assert len(pieces) >= 10
    wrong = []
    for piece in pieces:
        data = piece.encode("utf-8")
        page = b"<html><head><title>" + data + b"</title></head><body><p>" + data + b"</p></body></html>"
        if extract_main_content(data).text != piece or extract_main_content(page).title != piece:
            wrong.append(piece)
    assert wrong == []


def test_utf8_page_text_without_declaration(sample_pages):
    for page in sample_pages.values():
        text = extract_main_content(page.content).text
        if text.isascii():
            continue
        assert extract_main_content(text.encode("utf-8")).text == text, page.name


def test_bom_utf8(sample_pages):
    page = sample_pages["npr-dylann-roof-2022"]
    base = extract_main_content(page.content, page.url)
    with_bom = extract_main_content(b"\xef\xbb\xbf" + page.content, page.url)
    assert with_bom.encoding == "utf-8"
    assert with_bom.text == base.text and with_bom.title == base.title
    assert "\ufeff" not in with_bom.text


def test_bom_utf8_plain_text():
    text = "Plain text document: naïve café, “quoted”, with enough words to be fingerprinted."
    plain = fingerprint(text.encode("utf-8"))
    bom = fingerprint(b"\xef\xbb\xbf" + text.encode("utf-8"))
    assert bom.text == plain.text == normalize_text(text)
    assert bom.digest == plain.digest


def test_bom_utf8_with_header_charset(sample_pages):
    """A UTF-8 BOM is not content, also when the HTTP header names the charset."""
    headers = {"Content-Type": "text/plain; charset=utf-8"}
    text = "Plain text document served with a charset header, and enough words to be fingerprinted."
    a = fingerprint(b"\xef\xbb\xbf" + text.encode("utf-8"), headers=headers)
    b = fingerprint(text.encode("utf-8"), headers=headers)
    assert a.digest == b.digest
    assert "\ufeff" not in a.text
    page = sample_pages["npr-dylann-roof-2022"]
    headers = {"Content-Type": "text/html; charset=UTF-8"}
    a = fingerprint(b"\xef\xbb\xbf" + page.content, page.url, headers)
    b = fingerprint(page.content, page.url, headers)
    assert a.digest == b.digest


@pytest.mark.parametrize("encoding, prefix", [("utf-16", ""), ("utf-16-le", "\ufeff"), ("utf-16-be", "\ufeff")])
def test_utf16_with_bom(sample_pages, encoding, prefix):
    page = sample_pages["npr-dylann-roof-2022"]
    base = extract_main_content(page.content, page.url)
    data = (prefix + page.content.decode("utf-8")).encode(encoding)
    ext = extract_main_content(data, page.url)
    assert ext.text == base.text and ext.title == base.title


def test_utf16_declared_in_header(sample_pages):
    page = sample_pages["npr-dylann-roof-2022"]
    base = extract_main_content(page.content, page.url)
    data = page.content.decode("utf-8").encode("utf-16-le")
    ext = extract_main_content(data, page.url, headers={"Content-Type": "text/html; charset=utf-16le"})
    assert ext.text == base.text


def test_invalid_utf8_bytes_in_utf8_page(sample_pages):
    page = sample_pages["npr-dylann-roof-2022"]
    content = page.content
    sentence = "Federal prosecutors are seeking a death sentence."
    i = content.index(b"Federal prosecutors")
    broken = content[:i] + b"\xff\xfe\xc3\x28 \xed\xa0\x80 \x80" + content[i:]
    for headers in (None, {"Content-Type": "text/html; charset=utf-8"}):
        ext = extract_main_content(broken, page.url, headers)
        assert sentence in flat(ext.text)
        assert "Dylann Roof" in present(ext.title)
        fp = fingerprint(broken, page.url, headers)
        assert not fp.empty
        assert neardup.hamming(fp, fingerprint(content, page.url)) <= 3


def test_str_input_equals_bytes_input(sample_pages):
    page = sample_pages["npr-dylann-roof-2022"]
    as_bytes = fingerprint(page.content, page.url)
    as_str = fingerprint(page.content.decode("utf-8"), page.url)
    assert as_str.digest == as_bytes.digest and as_str.simhash == as_bytes.simhash
    assert extract_main_content(page.content.decode("utf-8")).encoding is None


# --------------------------------------------------------------------------- plain text


def test_plain_text_used_as_is(sample_pages):
    text = extract_main_content(sample_pages["newyorker-teas-2019"].content).text
    plain = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    ext = extract_main_content(plain)
    assert not ext.is_html and ext.text == plain and ext.title is None and ext.canonical_url is None
    assert ext.language == "en"
    ext_b = extract_main_content(plain.encode("utf-8"))
    assert not ext_b.is_html and ext_b.text == plain
    fp = fingerprint(plain)
    assert fp.text == normalize_text(plain)


def test_text_plain_header_skips_extraction():
    text = "<p>This looks like markup</p> but the server says it is plain text, so it stays."
    ext = extract_main_content(text.encode(), headers={"Content-Type": "text/plain; charset=utf-8"})
    assert not ext.is_html
    assert ext.text == text
    assert extract_main_content(text.encode()).is_html


def test_nul_characters_removed():
    ext = extract_main_content("some\x00 words\x00 here")
    assert "\x00" not in ext.text
    assert ext.text == "some words here"


# --------------------------------------------------------------------------- bad inputs


def test_empty_body_is_empty_not_an_error():
    for content in (b"", "", b"   \n\t ", b"<html><body></body></html>"):
        fp = fingerprint(content)
        assert fp.empty and fp.tokens == 0
        assert fp.digest == hashlib.sha256(b"").hexdigest()


def test_page_without_main_content_is_empty():
    page = (b"<html><head><title>Example</title></head><body>"
            b"<nav><ul><li><a href='/'>Home</a></li><li><a href='/about'>About us</a></li>"
            b"<li><a href='/contact'>Contact</a></li></ul></nav>"
            b"<footer><p>Copyright 2024 Example Inc. All rights reserved.</p>"
            b"<a href='/privacy'>Privacy policy</a></footer></body></html>")
    for extractor in ("fast", "accurate"):
        fp = fingerprint(page, config=FingerprintConfig(extractor=extractor))
        assert fp.empty, extractor
        assert fp.title == "Example"
    # with boilerplate kept the same page is not empty
    assert not fingerprint(page, config=FingerprintConfig(extractor="full")).empty


def test_short_text_is_empty_and_min_tokens():
    text = "only five words in here"
    assert fingerprint(text).empty
    assert fingerprint(text).tokens == 5
    assert not fingerprint(text, config=FingerprintConfig(min_tokens=5)).empty
    assert fingerprint(text, config=FingerprintConfig(min_tokens=6)).empty


@pytest.mark.parametrize("content, what", [
    (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\nendobj\n", "PDF"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10", "PNG"),
    (b"GIF89a\x01\x00\x01\x00\x80\x00\x00", "GIF"),
    (b"\xff\xd8\xff\xe0\x00\x10JFIF\x00", "JPEG"),
    (b"PK\x03\x04\x14\x00\x00\x00\x08\x00", "ZIP"),
    (gzip.compress(b"<html><body><p>hello</p></body></html>"), "gzip"),
    (b"\x00\x01\x02\x03" * 500, "NUL"),
])
def test_binary_magic_raises(content, what):
    with pytest.raises(InputError) as err:
        fingerprint(content)
    assert one_line(err.value)
    assert what.lower() in str(err.value).lower()


def test_gzipped_real_page_raises(sample_pages):
    with pytest.raises(InputError):
        fingerprint(sample_pages[ARTICLE].path.read_bytes())


def test_random_binary_raises():
    """Uniformly random bytes are binary, whatever their length (seeded, so reproducible)."""
    accepted = []
    for size in (512, 4096, 65536):
        for seed in range(12):
            data = random.Random(seed * 1000 + size).randbytes(size)
            try:
                fingerprint(data)
            except InputError as err:
                assert one_line(err)
            else:
                accepted.append((size, seed))
    assert accepted == [], f"random binary accepted as text for (size, seed) in {accepted}"


@pytest.mark.parametrize("ctype", ["image/png", "application/pdf", "application/octet-stream",
                                   "video/mp4; codecs=avc1", "IMAGE/JPEG"])
def test_non_text_content_type_raises(sample_pages, ctype):
    with pytest.raises(InputError) as err:
        fingerprint(sample_pages[ARTICLE].content, headers={"Content-Type": ctype})
    assert one_line(err.value)


def test_xhtml_content_type_accepted(sample_pages):
    page = sample_pages[ARTICLE]
    fp = fingerprint(page.content, headers={"Content-Type": "application/xhtml+xml"})
    assert fp.digest == fingerprint(page.content).digest


def test_over_max_bytes_raises(sample_pages):
    page = sample_pages[ARTICLE]
    small = FingerprintConfig(max_bytes=len(page.content) - 1)
    with pytest.raises(InputError) as err:
        fingerprint(page.content, config=small)
    assert one_line(err.value) and "max_bytes" in str(err.value)
    assert not fingerprint(page.content, config=FingerprintConfig(max_bytes=len(page.content))).empty
    # str input is measured in UTF-8 bytes: 400 kana are 1,200 bytes
    with pytest.raises(InputError):
        fingerprint("あ" * 400, config=FingerprintConfig(max_bytes=1000))
    assert fingerprint("あ" * 333, config=FingerprintConfig(max_bytes=1000)).tokens == 333


def test_50_mb_page_raises_under_default_limit(sample_pages):
    content = sample_pages[ARTICLE].content
    big = content * (50 * 1024 * 1024 // len(content) + 1)
    assert len(big) >= 50 * 1024 * 1024
    with pytest.raises(InputError) as err:
        fingerprint(big)
    assert one_line(err.value) and "16,777,216" in str(err.value)


def test_wrong_content_type_raises():
    for bad in (12345, None, ["<p>x</p>"], {"html": "x"}):
        with pytest.raises(InputError) as err:
            fingerprint(bad)  # type: ignore[arg-type]
        assert one_line(err.value)


def test_unknown_extractor_raises():
    with pytest.raises(neardup.ConfigError):
        extract_main_content(b"<p>x</p>", extractor="magic")


@pytest.mark.parametrize("tail", [b"", b"<p>unclosed <div><span>", b"<<<>>><div<p>&&&;;</td></tr>&#xZZZ;"])
def test_malformed_html_yields_fingerprint(sample_pages, tail):
    content = sample_pages[ARTICLE].content
    truncated = content[: len(content) // 2] + tail
    for extractor in ("fast", "accurate"):
        fp = fingerprint(truncated, config=FingerprintConfig(extractor=extractor))
        assert not fp.empty
        assert "the cybersecurity vendor marketplace is growing" in fp.text


def test_garbage_markup_yields_fingerprint():
    for junk in (b"<p><p><p></div></div></html><html><<>>&amp;&#xZZZ;&#99999999;",
                 b"<html><body><div><p>" + b"some words here and there " * 5 + b"<div><p><span>more <b>bold <i>x",
                 b"<" * 1000, b"<html" + b" a=" * 300, b"<!-- never closed comment <p>text</p>"):
        fp = fingerprint(junk)
        assert isinstance(fp, neardup.Fingerprint)
        assert len(fp.digest) == 64


# --------------------------------------------------------------------------- hostile input (issue 11)


def cnbc_article(sample_pages) -> tuple[bytes, str]:
    """The CNBC sample page and one sentence of its article."""
    sentence = "The aggressive tactics come as the cybersecurity market expands dramatically"
    return sample_pages[ARTICLE].content.decode("utf-8", "replace").encode("utf-8"), sentence


@pytest.mark.parametrize("text", ["hello <P", "<P", "a <pizza> and <pre", "x < p > y", "1 <a b"])
def test_text_with_a_stray_angle_bracket_is_plain_text(text):
    from neardup.fingerprint.extract import looks_like_html

    assert not looks_like_html(text)
    ext = extract_main_content(text)
    assert not ext.is_html and ext.text == text
    assert fingerprint("hello <P").text == "hello <p"


@pytest.mark.parametrize("text", ["<p>x</p>", "<P CLASS=a>x", "<br/>", "<!doctype html><title>t</title>",
                                  "hi <a href='/x'>there</a>"])
def test_complete_tags_are_html(text):
    from neardup.fingerprint.extract import looks_like_html

    assert looks_like_html(text) and looks_like_html(text.encode())


@pytest.mark.parametrize("extractor", EXTRACTORS)
def test_lone_surrogates_in_str_input(sample_pages, extractor):
    content, sentence = cnbc_article(sample_pages)
    html = content.decode("utf-8").replace("<body", "<body data-x='\ud800'", 1)
    html = html.replace(sentence, "\udfff " + sentence, 1)
    ext = extract_main_content(html, extractor=extractor)
    assert sentence in flat(ext.text)
    ext.text.encode("utf-8")  # no surrogate left
    assert not fingerprint(html, config=FingerprintConfig(extractor=extractor)).empty


@pytest.mark.parametrize("charset", ["undefined", "punycode", "idna", "unicode_escape", "base64", "rot13",
                                     "zlib", "hex", "x" * 300, "utf-8\x00", "../../etc"])
def test_bogus_charsets_are_ignored(sample_pages, charset):
    content, sentence = cnbc_article(sample_pages)
    ext = extract_main_content(content, headers={"Content-Type": f"text/html; charset={charset}"})
    assert sentence in flat(ext.text)
    ext = extract_main_content(content.replace(b"<head>", f'<head><meta charset="{charset}">'.encode(), 1))
    assert sentence in flat(ext.text)


def test_utf7_lone_surrogate_is_replaced():
    # UTF-7 can encode a lone surrogate: the decoded page must still be parseable
    page = b"<html><body><p>before +2AA- after</p></body></html>"
    for extractor in EXTRACTORS:
        ext = extract_main_content(page, headers={"Content-Type": "text/html; charset=utf-7"}, extractor=extractor)
        assert "before \ufffd after" in ext.text, extractor


def nested(content: bytes, depth: int) -> str:
    """The page with everything in its <body> wrapped in ``depth`` nested <div>s."""
    html = content.decode("utf-8")
    start = html.index(">", html.index("<body")) + 1
    end = html.rindex("</body>")
    return html[:start] + "<div>" * depth + html[start:end] + "</div>" * depth + html[end:]


def test_accurate_falls_back_on_deep_nesting(sample_pages):
    # lxml stops below 256 levels: trafilatura returned nothing for such pages
    content, sentence = cnbc_article(sample_pages)
    ok = extract_main_content(nested(content, 100), extractor="accurate")
    assert ok.extractor == "accurate" and ok.fallback is None and sentence in flat(ok.text)
    deep = extract_main_content(nested(content, 400), extractor="accurate")
    assert deep.extractor == "fast" and "nested over" in present(deep.fallback)
    assert sentence in flat(deep.text)


@pytest.mark.parametrize("depth", [10_000, 40_000])
def test_fast_extractor_depth_budget(sample_pages, depth):
    # the main-content pass is quadratic in nesting (10k levels took 2 s, 40k over 40 s)
    content, sentence = cnbc_article(sample_pages)
    for extractor in ("fast", "accurate"):
        ext = extract_main_content(nested(content, depth), extractor=extractor)
        assert ext.extractor == "full" and "levels deep" in present(ext.fallback)
        assert sentence in flat(ext.text)


def test_huge_text_node_is_not_silently_empty():
    body = ("word " * 2_100_000).strip()  # 10.5 MB in one text node: over lxml's limit
    page = f"<html><head><title>big</title></head><body><p>{body}</p></body></html>"
    ext = extract_main_content(page, extractor="accurate")
    assert ext.extractor == "fast" and "text node" in present(ext.fallback)
    assert len(ext.text) == len(body)


def test_many_elements_skip_trafilatura():
    page = "<html><body>" + "<p></p>" * 200_000 + "<p>" + "some words " * 20 + "</p></body></html>"
    ext = extract_main_content(page, extractor="accurate")
    assert ext.extractor == "fast" and "elements" in present(ext.fallback)
    assert "some words" in ext.text


def test_real_pages_use_the_extractor_asked_for(sample_pages):
    for page in sample_pages.values():
        for extractor in EXTRACTORS:
            ext = extract_main_content(page.content, page.url, extractor=extractor)
            assert ext.extractor == extractor and ext.fallback is None, (page.name, extractor)
