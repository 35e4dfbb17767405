"""From raw bytes (or str) to main content: decoding, boilerplate removal, metadata.

Extractors, chosen by ``extractor``:

* ``hybrid``: one Lexbor parse; Resiliparse's main-content pass, then text- and link-density
  block selection (:mod:`neardup.fingerprint.extract_fast`); trafilatura only where that result looks
  wrong (empty or short on a page with text, or a small part of what the main-content pass
  found). About 4-5x cheaper than
  trafilatura with the same or better word F1 on every gold set (docs/extraction.md).
  ``ExtractedPage.path`` says which path a page took.
* ``fast``: Resiliparse ``extract_plain_text(main_content=True)`` on a Lexbor DOM,
  about 14x faster than trafilatura, with heading and list structure kept.
* ``accurate`` (the fingerprint default): trafilatura (``fast=True``: no fallback extractors,
  which measured as good and 40% faster), Markdown output.
* ``full``: all visible text, boilerplate included (for pages that are not articles).

Before any parser, :func:`neardup.fingerprint.guards.guard_markup` checks the markup with linear scans
(attributes per element and in total, tags, character references, nesting): an element with
too many attributes is trimmed, and a page over a limit is read as text only, without a parser
(``ExtractedPage.fallback`` says why, ``path`` is ``"text"``).

Plain text (no HTML markup, or a ``text/plain`` header) skips extraction. Title,
``<link rel="canonical">`` (resolved against the page URL) and the language come from the
same parse in every mode.

>>> page = extract_main_content(b"<html><head><title>T</title></head><body><article>"
...     b"<h1>Hello</h1><p>" + b"word " * 30 + b"</p></article></body></html>")
>>> page.title, page.text.splitlines()[0]
('T', '# Hello')
"""

from __future__ import annotations

import codecs
import html as html_lib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.encoding import bytes_to_str, detect_encoding
from resiliparse.parse.html import HTMLTree
from resiliparse.parse.lang import detect_fast

from neardup.errors import ConfigError, InputError
from neardup.fingerprint.extract_fast import (
    LINK_LIST_MAX_READING,
    MIN_MAIN_WORDS,
    Block,
    count_words,
    is_link_list,
    looks_wrong,
    parse_blocks,
    select_main_blocks,
)
from neardup.fingerprint.guards import guard_markup, text_only
from neardup.fingerprint.regions import content_region, protect_prose_lists
from neardup.fingerprint.structure import structure_simhash

EXTRACTORS = ("fast", "accurate", "full", "hybrid")
DEFAULT_MAX_BYTES = 16 * 1024 * 1024

# Work budgets. Hostile or broken pages get a safe extractor instead of a hang or a silently
# empty text (the page records which extractor ran and why: ExtractedPage.fallback):
# * lxml (under trafilatura) stops reading below 256 levels of nesting and drops text nodes
#   of 10,000,000 bytes or more, so "accurate" would return nothing for such pages, and it
#   spends ~25 µs per element (a million empty <p> took 24 s): above these the page goes
#   to Resiliparse;
# * Resiliparse's main-content pass costs about elements x depth (10,000 nested <div> took
#   2 s, a million elements 250 levels deep 54 s): above MAIN_CONTENT_WORK the page gets
#   all its visible text ("full", linear: 0.4 s for that page).
# * an HTML5 parser re-opens every still-open formatting element (<b>, <font>, <a>...) for
#   each new block: 3,000 distinct unclosed <b a=N> before 2,000 paragraphs made Lexbor
#   build 6 million elements from 55 KB (0.9 s, 2.4 GB). Where more than FORMATTING_MAX_OPEN
#   formatting elements are open at once (real pages: at most 172 in 5,521), they are
#   dropped before parsing (they carry no text).
FORMATTING_MAX_OPEN = 500
ACCURATE_MAX_DEPTH = 240
ACCURATE_MAX_ELEMENTS = 100_000
ACCURATE_MAX_TEXT_RUN = 9_000_000
MAIN_CONTENT_WORK = 10_000_000
# the hybrid extractor hands a page to trafilatura only below these sizes (trafilatura took
# 4-6 s on real 1.7-2.5 MB documentation pages); above them the fast result stands
HYBRID_FALLBACK_MAX_CHARS = 1_000_000
HYBRID_FALLBACK_MAX_ELEMENTS = 20_000

_BINARY_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"%PDF", "PDF"),
    (b"\x89PNG", "PNG image"),
    (b"GIF8", "GIF image"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"PK\x03\x04", "ZIP archive"),
    (b"\x1f\x8b", "gzip data (decompress it first)"),
    (b"RIFF", "RIFF media"),
    (b"\x00\x00\x01\x00", "icon"),
    (b"OggS", "Ogg media"),
    (b"ID3", "MP3 audio"),
    (b"\x7fELF", "executable"),
    (b"wOFF", "web font"),
    (b"wOF2", "web font"),
)
_NON_TEXT_TYPES = ("image/", "audio/", "video/", "font/", "application/pdf", "application/zip",
                   "application/octet-stream", "application/x-", "application/vnd.")
# HTML is a complete tag of a common element (``<p>``, ``<div class="x">``, ``<br/>``) or an
# HTML doctype: "hello <P" or "a <pizza" is text, not markup
_HTML_TAGS = (rb"html|head|body|div|p|article|section|main|header|footer|nav|aside|meta|link|title|script|"
              rb"style|table|tr|td|th|span|a|br|hr|img|ul|ol|li|h[1-6]|pre|blockquote|form|iframe|b|i|em|"
              rb"strong|font|center")
_HTML_SNIFF = re.compile(rb"<(?:!doctype\s+html[^<>]*|(?:" + _HTML_TAGS + rb")(?:\s[^<>]*)?/?)>", re.IGNORECASE)
_CONTROL_BYTES = bytes([b for b in range(32) if (b < 9 or 13 < b < 32) and b != 0x1B])  # ESC: ISO-2022
_CHARSET = re.compile(r"charset\s*=\s*[\"']?([\w.:-]+)", re.IGNORECASE)
_HEADING_OPEN = re.compile(r"<h[1-6][^>]*>\s*", re.IGNORECASE)
_LI_OPEN = re.compile(r"<li[^>]*>\s*", re.IGNORECASE)
_TAG = re.compile(r"</?[a-zA-Z][^>]*>")


@dataclass(frozen=True)
class ExtractedPage:
    """Main content of one page and what was read off it on the way."""

    text: str
    title: str | None = None
    canonical_url: str | None = None
    language: str | None = None
    encoding: str | None = None
    is_html: bool = True
    extractor: str | None = None  # the extractor that ran (None for plain text, "text": no parser)
    fallback: str | None = None  # why it is not the one asked for (a budget was exceeded)
    # how the text was made: "fast" or "fallback: <why>" (trafilatura) for ``hybrid``;
    # "text" when a guard sent the page past every parser; None otherwise
    path: str | None = None
    #: the structure SimHash of the page's DOM (neardup.fingerprint.structure), from the same parse;
    #: None where no tree was built (trafilatura's own parse, plain text, text-only pages)
    structure: int | None = None


def header(headers: Mapping[str, str] | None, name: str) -> str | None:
    """Case-insensitive HTTP header lookup."""
    if not headers:
        return None
    lname = name.lower()
    for key, value in headers.items():
        if str(key).lower() == lname:
            return str(value)
    return None


def declared_charset(headers: Mapping[str, str] | None) -> str | None:
    ctype = header(headers, "content-type")
    m = _CHARSET.search(ctype) if ctype else None
    return m.group(1).lower() if m else None


def _bom_encoding(data: bytes) -> str | None:
    if data.startswith(b"\xef\xbb\xbf"):
        return "utf-8-sig"
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    return None


def check_binary(data: bytes, content_type: str | None = None, charset: str | None = None) -> None:
    """Raise :class:`InputError` when ``data`` is clearly not text: a non-text content type,
    a known binary signature (PDF, images, archives), NUL bytes, or more than 2% control
    bytes (text has almost none; random or compressed bytes about 10%). UTF-16/32 text (a
    BOM or a declared charset) is exempt from the byte checks."""
    if content_type:
        ctype = content_type.split(";")[0].strip().lower()
        if ctype.startswith(_NON_TEXT_TYPES) and not ctype.endswith(("+xml", "xhtml")):
            raise InputError(f"content type {ctype!r} is not HTML or text")
    head = data[:4096].lstrip()
    for magic, what in _BINARY_MAGIC:
        if head.startswith(magic):
            raise InputError(f"binary content ({what}) is not HTML or text")
    if _bom_encoding(data) == "utf-16" or (charset or "").startswith(("utf-16", "utf-32", "ucs-2")):
        return
    sample = data[:8192]
    if sample:
        if sample.count(0) > len(sample) // 1000:
            raise InputError("binary content (NUL bytes) is not HTML or text")
        controls = len(sample) - len(sample.translate(None, _CONTROL_BYTES))
        if controls > len(sample) // 50:
            raise InputError("binary content (control bytes) is not HTML or text")


# codecs that Python knows but that are not a page's character set: decoding with them
# raises odd errors (``undefined``) or turns bytes into something else (``punycode``,
# ``unicode_escape`` makes lone surrogates out of "\\ud800")
_NOT_CHARSETS = frozenset({"undefined", "punycode", "idna", "unicode_escape", "raw_unicode_escape",
                           "unicode_internal", "mbcs", "oem", "palmos"})


def _codec(name: str | None) -> str | None:
    """The Python codec for a declared charset, or None when it is unknown or not a text
    encoding (``base64``, ``rot13``, ``undefined``, ``punycode``...)."""
    if not name or len(name) > 64:
        return None
    try:
        info = codecs.lookup(name)
    except (LookupError, ValueError, TypeError):
        return None
    if not getattr(info, "_is_text_encoding", True) or info.name.replace("-", "_") in _NOT_CHARSETS:
        return None
    return info.name


def _decode_with(data: bytes, encoding: str, errors: str = "strict") -> str | None:
    """``data.decode(encoding)``, or None when the codec refuses (any codec error)."""
    try:
        return data.decode(encoding, errors)
    except (UnicodeError, LookupError, ValueError, TypeError, OverflowError):
        return None


def decode(data: bytes, headers: Mapping[str, str] | None = None) -> tuple[str, str]:
    r"""Decode page bytes: a BOM, else the HTTP charset, else valid UTF-8, else the
    ``<meta charset>``, else detection (uchardet). Returns ``(text, encoding)``;
    undecodable bytes are dropped, never fatal, and a declared charset that is not a text
    encoding (``undefined``, ``punycode``, ``base64``...) is ignored.

    >>> decode("Trump’s".encode())[0], decode(b"caf\xe9", {"Content-Type": "text/html; charset=latin-1"})[0]
    ('Trump’s', 'café')
    >>> decode(b"caf\xc3\xa9", {"Content-Type": "text/html; charset=undefined"})
    ('café', 'utf-8')
    """
    bom = _bom_encoding(data)
    if bom:
        name = "utf-8" if bom == "utf-8-sig" else bom  # report the charset, not the codec
        text = _decode_with(data, bom)
        return (text if text is not None else data.decode(bom, "replace")), name
    declared = declared_charset(headers)
    codec = _codec(declared)
    if codec:
        text = _decode_with(data, codec)
        if text is not None:
            return text, declared or codec
    text = _decode_with(data, "utf-8")
    if text is not None:
        return text, "utf-8"
    try:
        encoding = detect_encoding(data, from_html_meta=True)
    except Exception:  # noqa: BLE001 - a detector failure only means "no idea"
        encoding = None
    codec = _codec(encoding)
    if codec:
        try:
            return bytes_to_str(data, codec), encoding or codec
        except Exception:  # noqa: BLE001 - fall through to lossy UTF-8
            pass
    return data.decode("utf-8", "replace"), "utf-8"


def looks_like_html(data: bytes | str, content_type: str | None = None) -> bool:
    if content_type:
        ctype = content_type.split(";")[0].strip().lower()
        if ctype == "text/plain":
            return False
        if "html" in ctype:
            return True
    head = data[:4096]
    if isinstance(head, str):
        head = head.encode("utf-8", "ignore")
    return bool(_HTML_SNIFF.search(head))


def _minimal_html_to_markdown(text: str) -> str:
    text = _HEADING_OPEN.sub("\n# ", text)
    text = _LI_OPEN.sub("\n- ", text)
    text = _TAG.sub("\n", text)
    return html_lib.unescape(text).strip()


def _language(text: str, tree: HTMLTree | None) -> str | None:
    sample = text[:2000]
    if len(sample.strip()) >= 40:
        lang, rank = detect_fast(sample)
        if lang != "unknown" and rank <= 1200:
            return lang
    if tree is not None and tree.document is not None:
        el = tree.document.query_selector("html")
        attr = el.getattr("lang") if el is not None else None
        if attr:
            return attr.split("-")[0].lower() or None
    return None


def _canonical(tree: HTMLTree, url: str | None) -> str | None:
    doc = tree.document
    if doc is None:
        return None
    el = doc.query_selector('link[rel~="canonical" i]')
    return _resolve(el.getattr("href") if el is not None else None, url)


def _resolve(href: str | None, url: str | None) -> str | None:
    """A canonical href resolved against the page URL (None when empty or malformed)."""
    if not href or not href.strip():
        return None
    href = href.strip()
    try:
        return urljoin(url, href) if url else href
    except ValueError:
        return None


_EMPHASIS = re.compile(r"(?<![\w*_])(\*{1,3}|_{1,3})(?=[^\s*_])|(?<=[^\s*_])(\*{1,3}|_{1,3})(?![\w*_])")
_HEADING_LEVEL = re.compile(r"^#{2,6} ", re.MULTILINE)


def _markdown_structure_only(text: str) -> str:
    r"""Keep headings ('# ', any level) and list items; drop emphasis markers, which depend
    on a template's use of <b>/<em>, not on the content.

    >>> _markdown_structure_only("## Title\n- item with **bold** and *it*\nsnake_case stays")
    '# Title\n- item with bold and it\nsnake_case stays'
    """
    return _HEADING_LEVEL.sub("# ", _EMPHASIS.sub("", text))


def _trafilatura_page(html: str, url: str | None) -> tuple[str, str | None, str | None]:
    """(main text, title, canonical href) from one lxml parse shared with trafilatura."""
    import trafilatura  # imported lazily: it is slow to import and only this mode needs it
    from trafilatura.utils import load_html

    tree = load_html(html)
    if tree is None:
        return "", None, None
    title = tree.findtext(".//title")
    hrefs = tree.xpath('//link[contains(concat(" ", normalize-space(translate(@rel, "CANONIAL", "canonial")), " "),'
                       ' " canonical ")]/@href')
    out = trafilatura.extract(
        tree, url=url, output_format="markdown", include_comments=False, include_tables=True,
        include_images=False, include_links=False, fast=True, deduplicate=False,
    )
    return _markdown_structure_only(out or ""), title, (str(hrefs[0]) if hrefs else None)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _without_surrogates(text: str) -> str:
    """``text`` with lone surrogates (not Unicode scalar values: no parser or database can
    encode them) replaced by U+FFFD."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)


_FORMATTING_TAG = re.compile(r"<(/?)(?:a|b|big|code|em|font|i|nobr|s|small|strike|strong|tt|u)(?=[\s/>])",
                             re.IGNORECASE)
_FORMATTING_TAG_WHOLE = re.compile(r"</?(?:a|b|big|code|em|font|i|nobr|s|small|strike|strong|tt|u)(?:[\s/][^<>]*)?>",
                                   re.IGNORECASE)


def _formatting_open(text: str) -> int:
    """The most formatting elements open at once (close tags matched by count)."""
    depth = peak = 0
    for slash in _FORMATTING_TAG.findall(text):
        if slash:
            depth = depth - 1 if depth else 0
        else:
            depth += 1
            if depth > peak:
                peak = depth
    return peak


def _defuse_formatting(text: str) -> tuple[str, str | None]:
    """``text`` without formatting tags when so many are open at once that the parser's
    re-opening would multiply elements (and why), else ``text`` unchanged."""
    if text.count("<") <= FORMATTING_MAX_OPEN:
        return text, None
    peak = _formatting_open(text)
    if peak <= FORMATTING_MAX_OPEN:
        return text, None
    return _FORMATTING_TAG_WHOLE.sub("", text), f"{peak:,} formatting elements open at once: formatting tags dropped"


def _start_tags(text: str) -> int:
    """Upper bound on the number of elements (start tags, comments, doctypes)."""
    return text.count("<") - text.count("</") + 8  # + implied html/head/body/tbody...


def _deeper_than(tree: HTMLTree, depth: int) -> bool:
    """True when some element of ``tree`` has more than ``depth`` element ancestors
    (``html`` is at depth 1). One compiled selector pass, about elements x min(depth,
    real depth) steps."""
    doc = tree.document
    if doc is None or depth < 1:
        return doc is not None
    return doc.query_selector(" > ".join(["*"] * (depth + 1))) is not None


def _longest_text_run(text: str) -> int:
    """Length of the longest stretch without a '<' (an upper bound on a text node)."""
    longest = pos = 0
    n = len(text)
    while pos < n:
        nxt = text.find("<", pos)
        if nxt < 0:
            nxt = n
        longest = max(longest, nxt - pos)
        pos = nxt + 1
    return longest


def _accurate_refusal(text: str, tree: HTMLTree | None) -> str | None:
    """Why trafilatura cannot extract this page faithfully (None when it can)."""
    elements = _start_tags(text)
    if elements > ACCURATE_MAX_ELEMENTS:
        return f"over {ACCURATE_MAX_ELEMENTS:,} elements"
    if len(text) > ACCURATE_MAX_TEXT_RUN and _longest_text_run(text) > ACCURATE_MAX_TEXT_RUN:
        return f"a text node over {ACCURATE_MAX_TEXT_RUN:,} characters"
    if tree is not None and elements > ACCURATE_MAX_DEPTH and _deeper_than(tree, ACCURATE_MAX_DEPTH):
        return f"nested over {ACCURATE_MAX_DEPTH} levels deep"
    return None


def _main_content_refusal(text: str, tree: HTMLTree) -> str | None:
    """Why Resiliparse's main-content pass would take too long (None when it will not)."""
    elements = _start_tags(text)
    if elements * elements <= MAIN_CONTENT_WORK:
        return None  # depth <= elements
    depth = max(1, MAIN_CONTENT_WORK // elements)
    if _deeper_than(tree, depth):
        return f"{elements:,} elements nested over {depth} levels deep"
    return None


def extract_main_content(
    content: bytes | str,
    url: str | None = None,
    headers: Mapping[str, str] | None = None,
    *,
    extractor: str = "fast",
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> ExtractedPage:
    """Main content of a page as Markdown-like text, with title, canonical link, language.

    Raises :class:`InputError` for binary bodies, pages over ``max_bytes`` and pages no
    extractor can read. Pages over a work budget (see ``ACCURATE_MAX_DEPTH`` and
    ``MAIN_CONTENT_WORK``) are read by a cheaper extractor: ``extractor`` and ``fallback``
    on the result say which one and why; ``path`` says how ``hybrid`` made the text.

    >>> html = (b"<html><head><title>T</title></head><body><nav><a href='/'>Home</a></nav><article>"
    ...         b"<h1>Hello</h1><p>" + b"word " * 60 + b"</p></article></body></html>")
    >>> page = extract_main_content(html, extractor="hybrid")
    >>> page.extractor, page.path, page.text.splitlines()[0]
    ('hybrid', 'fast', '# Hello')
    """
    if extractor not in EXTRACTORS:
        raise ConfigError(f"unknown extractor {extractor!r}; choose one of {', '.join(EXTRACTORS)}")
    if not isinstance(content, (bytes, bytearray, memoryview, str)):
        raise InputError(f"content must be bytes or str, not {type(content).__name__}")
    size = len(content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content)
    if size > max_bytes:
        raise InputError(f"page is {size:,} bytes, over the {max_bytes:,}-byte limit (max_bytes)")
    ctype = header(headers, "content-type")
    encoding = None
    if isinstance(content, str):
        text = content
    else:
        data = bytes(content)
        check_binary(data, ctype, declared_charset(headers))
        text, encoding = decode(data, headers)
    if "\x00" in text:
        text = text.replace("\x00", "")
    if not looks_like_html(text, ctype):
        return ExtractedPage(text=text, language=_language(text, None), encoding=encoding, is_html=False)
    text = _without_surrogates(text)
    try:
        return _extract_html(text, url, extractor, encoding)
    except (RecursionError, MemoryError, UnicodeError, ValueError, TypeError, AttributeError,
            IndexError, KeyError, AssertionError, LookupError, OverflowError) as exc:
        # a bug or limit of a third-party extractor on this page: a typed error naming it
        raise InputError(f"the {extractor} extractor failed on this page "
                         f"({type(exc).__name__}: {str(exc)[:200]})") from exc


_TITLE = re.compile(r"<title\b[^>]*>([^<]{0,2000})", re.IGNORECASE)


def _join(first: str | None, second: str | None) -> str | None:
    return f"{first}; {second}" if first and second else first or second


def _text_only_page(markup: str, encoding: str | None, reason: str | None) -> ExtractedPage:
    """A page read without any parser (a guard refused it): tags removed by regex."""
    m = _TITLE.search(markup[:1_000_000])
    title = " ".join(html_lib.unescape(m.group(1)).split()) if m else None
    main = text_only(markup)
    return ExtractedPage(text=main, title=title or None, language=_language(main, None), encoding=encoding,
                         is_html=True, extractor="text", fallback=reason, path="text")


def _extract_html(text: str, url: str | None, extractor: str, encoding: str | None) -> ExtractedPage:
    tree: HTMLTree | None = None
    guarded = guard_markup(text)
    if guarded.mode == "text":
        return _text_only_page(text, encoding, guarded.reason)
    text, fallback = _defuse_formatting(guarded.markup)
    fallback = _join(guarded.reason, fallback)
    if extractor == "hybrid":
        return _extract_hybrid(text, url, encoding, fallback)
    if extractor == "accurate":
        refusal = _accurate_refusal(text, None)
        if refusal is None and _start_tags(text) > ACCURATE_MAX_DEPTH:
            tree = HTMLTree.parse(text)
            refusal = _accurate_refusal(text, tree)
        if refusal is None:
            main, title, href = _trafilatura_page(text, url)
            title = " ".join(title.split()) if title else None
            return ExtractedPage(
                text=main, title=title or None, canonical_url=_resolve(href, url),
                language=_language(main, None), encoding=encoding, is_html=True, extractor="accurate",
                fallback=fallback,
            )
        extractor, fallback = "fast", f"{fallback}; accurate: {refusal}" if fallback else f"accurate: {refusal}"
    if tree is None:
        tree = HTMLTree.parse(text)
    if extractor == "fast":
        refusal = _main_content_refusal(text, tree)
        if refusal is not None:
            extractor, fallback = "full", f"{fallback}; fast: {refusal}" if fallback else f"fast: {refusal}"
    title = tree.title.strip() if tree.title else None
    raw = extract_plain_text(
        tree, preserve_formatting="minimal_html", main_content=(extractor == "fast"),
        list_bullets=False, alt_texts=False, links=False, form_fields=False, noscript=False,
        comments=False,
    )
    main = _minimal_html_to_markdown(raw)
    return ExtractedPage(
        text=main, title=title or None, canonical_url=_canonical(tree, url),
        language=_language(main, tree), encoding=encoding, is_html=True, extractor=extractor,
        fallback=fallback, structure=structure_simhash(tree),
    )


_PLAIN: dict[str, Any] = {
    "list_bullets": False, "alt_texts": False, "form_fields": False, "noscript": False, "comments": False,
}


def _region_blocks(tree: HTMLTree) -> tuple[list[Block], bool] | None:
    """The blocks of the page's content region (:func:`neardup.fingerprint.regions.content_region`,
    links counted, without its chrome) and whether the markup names it; None when the page has
    none."""
    region = content_region(tree)
    if region is None:
        return None

    def blocks(node: Any) -> list[Block]:
        return parse_blocks(extract_plain_text(node.html, preserve_formatting="minimal_html", main_content=False,
                                               links=True, **_PLAIN))

    chrome_text = {block.text for node in region.aside for block in blocks(node)}
    return [block for block in blocks(region.node) if block.text not in chrome_text], region.marked


def _extract_hybrid(text: str, url: str | None, encoding: str | None, fallback: str | None) -> ExtractedPage:
    """The ``hybrid`` extractor: the fast path (:mod:`neardup.fingerprint.extract_fast`) on one Lexbor
    parse, trafilatura where its result looks wrong and the page is small enough."""
    tree = HTMLTree.parse(text)
    structure = structure_simhash(tree)  # reads the tree, changes nothing
    title = tree.title.strip() if tree.title else None
    refusal = _main_content_refusal(text, tree)
    if refusal is not None:  # too deep for the main-content pass: all visible text
        raw = extract_plain_text(tree, preserve_formatting="minimal_html", main_content=False, links=False, **_PLAIN)
        main = _minimal_html_to_markdown(raw)
        return ExtractedPage(
            text=main, title=title or None, canonical_url=_canonical(tree, url), language=_language(main, tree),
            encoding=encoding, is_html=True, extractor="full", fallback=_join(fallback, f"hybrid: {refusal}"),
            path="full", structure=structure)
    protect_prose_lists(tree)  # an article's lists near the top of the body are not navigation
    raw = extract_plain_text(tree, preserve_formatting="minimal_html", main_content=True, links=True,
                             post_meta=False, **_PLAIN)
    found = parse_blocks(raw)
    blocks = select_main_blocks(found)
    main = "\n".join(block.text for block in blocks)
    main_words = sum(block.words for block in blocks)
    visible_words = None
    if main_words < MIN_MAIN_WORDS:  # the page's visible words: only counted where needed
        visible_words = count_words(extract_plain_text(tree, preserve_formatting=False, main_content=False,
                                                       links=False, **_PLAIN))
    why = looks_wrong(main_words, sum(block.words for block in found), visible_words)
    path = "fast"
    found_region = _region_blocks(tree) if main_words < MIN_MAIN_WORDS else None
    listed, list_links = None, 0  # the page's list of links, where that is its content
    if found_region is not None and is_link_list(found_region[0], blocks):
        listed, list_links = "\n".join(block.text for block in found_region[0]), sum(
            block.link_words for block in found_region[0])
        if found_region[1]:  # in the region the markup names: the list is the content
            main, path, why = listed, "link-list", None
    if why is not None:
        if (len(text) <= HYBRID_FALLBACK_MAX_CHARS and _start_tags(text) <= HYBRID_FALLBACK_MAX_ELEMENTS
                and _accurate_refusal(text, tree) is None):
            slow, _, _ = _trafilatura_page(text, url)
            if slow.strip():
                main, path = slow, f"fallback: {why}"
            else:
                path = f"fast (trafilatura found nothing either: {why})"
        else:
            path = f"fast (too large for the fallback: {why})"
        if not path.startswith("fallback"):  # no better reading: all the main-content pass found
            main = "\n".join(block.text for block in found)
        if listed is not None and count_words(main) < max(MIN_MAIN_WORDS, LINK_LIST_MAX_READING * list_links):
            # a page without a marked region (a print version) whose list dwarfs every reading: its list
            main, path = listed, "link-list"
    return ExtractedPage(
        text=main, title=title or None, canonical_url=_canonical(tree, url), language=_language(main, tree),
        encoding=encoding, is_html=True, extractor="hybrid", fallback=fallback, path=path, structure=structure)
