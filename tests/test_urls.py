"""URL identity (neardup.urls.normalize_url): url-normalize's own edge cases, IDNA, ports,
percent-encoding, dot segments, tracking parameters, the config, idempotence, bad URLs."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from url_normalize import url_normalize

from neardup.errors import ConfigError, URLError
from neardup.urls import (
    DEFAULT_TRACKING_PARAMS,
    DEFAULT_URL_CONFIG,
    UrlConfig,
    comparable_url,
    host_of,
    normalize_url,
    validate_url,
)

# -- url-normalize's own test suite (tests/test_url_normalize.py, test_normalize_path.py,
#    test_normalize_host.py, test_normalize_query.py), the absolute http(s)/ftp cases --------

UNCHANGED = [
    "ftp://user:pass@ftp.foo.net/foo/bar",
    "http://127.0.0.1/",
    "http://example.com:8080/",
    "http://example.com/?a&b",
    "http://example.com/?q=%5C",
    "http://example.com/?q=%C3%87",
    "http://example.com/?q=%E2%85%A0",
    "http://example.com/",
    "http://example.com/~jane",
    "http://example.com/a/b",
    "http://example.com/FOO",
    "http://user:password@example.com/",
    "http://www.foo.com:8000/foo",
    "ftp://ftp.is.co.za/rfc/rfc1808.txt",
    "http://www.ietf.org/rfc/rfc2396.txt",
    "http://example.com/..foo",
    "http://example.com/.foo",
    "http://example.com/foo..",
    "http://example.com/foo.",
    "http://example.com/More+Tea+Vicar%3F/discussion",   # upstream issue 25: an escaped ? stays escaped
    "http://example.com/?q=%23test",                      # upstream issue 31: an escaped # in a value
    "http://example.com/?where=code%3D123",               # upstream issue 25: an escaped = in a value
]


@pytest.mark.parametrize("url", UNCHANGED)
def test_upstream_urls_that_need_no_change(url):
    assert normalize_url(url) == url


CHANGED = [
    ("http://example.com/../foo", "http://example.com/foo"),
    ("http://example.com/./../foo", "http://example.com/foo"),
    ("http://example.com/./foo", "http://example.com/foo"),
    ("http://example.com/./foo/.", "http://example.com/foo/"),
    ("http://example.com/foo/../bar", "http://example.com/bar"),
    ("http://example.com/foo/./bar", "http://example.com/foo/bar"),
    # empty segments are kept (url-normalize collapses them; see _path_has_empty_segment)
    ("http://example.com/foo//", "http://example.com/foo//"),
    ("http://example.com/foo///bar//", "http://example.com/foo///bar//"),
    ("https://web.archive.org/web/2019/https://a.example/x/./y", "https://web.archive.org/web/2019/https://a.example/x/y"),
    ("http://example.com/foo/bar/..", "http://example.com/foo/"),
    ("http://example.com/foo/bar/../..", "http://example.com/"),
    ("http://example.com/foo/bar/../../../../baz", "http://example.com/baz"),
    ("http://example.com/foo/bar/../../../baz", "http://example.com/baz"),
    ("http://example.com/foo/bar/../../", "http://example.com/"),
    ("http://example.com/foo/bar/../../baz", "http://example.com/baz"),
    ("http://example.com/foo/bar/../", "http://example.com/foo/"),
    ("http://example.com/foo/bar/../baz", "http://example.com/foo/baz"),
    ("http://example.com/foo/bar/.", "http://example.com/foo/bar/"),
    ("http://example.com/foo/bar/./", "http://example.com/foo/bar/"),
    ("http://:@example.com/", "http://example.com/"),
    ("http://@example.com/", "http://example.com/"),
    ("http://127.0.0.1:80/", "http://127.0.0.1/"),
    ("http://example.com:081/", "http://example.com:81/"),
    ("http://example.com:80/", "http://example.com/"),
    ("http://example.com", "http://example.com/"),
    ("http://example.com/?b&a", "http://example.com/?b&a"),
    ("http://example.com/?q=%5c", "http://example.com/?q=%5C"),
    ("http://example.com/?q=C%CC%A7", "http://example.com/?q=%C3%87"),   # NFC
    ("http://EXAMPLE.COM/", "http://example.com/"),
    ("http://example.com/%7Ejane", "http://example.com/~jane"),
    ("http://example.com/a/../a/b", "http://example.com/a/b"),
    ("http://example.com/a/./b", "http://example.com/a/b"),
    ("http://USER:pass@www.Example.COM/foo/bar", "http://USER:pass@www.example.com/foo/bar"),
    ("http://www.example.com./", "http://www.example.com/"),
    ("http://www.foo.com:80/foo", "http://www.foo.com/foo"),
    ("http://www.foo.com.:81/foo", "http://www.foo.com:81/foo"),
    ("http://www.foo.com./foo/bar.html", "http://www.foo.com/foo/bar.html"),
    ("http://www.foo.com/%7Ebar", "http://www.foo.com/~bar"),
    ("http://www.foo.com/%7ebar", "http://www.foo.com/~bar"),
    ("https://пример.испытание/Служебная:Search/Test",
     "https://xn--e1afmkfd.xn--80akhbyknj4f/%D0%A1%D0%BB%D1%83%D0%B6%D0%B5%D0%B1%D0%BD%D0%B0%D1%8F:Search/Test"),
    ("http://example.com/?&&&", "http://example.com/"),
    ("http://example.com/?Ç=Ç", "http://example.com/?%C3%87=%C3%87"),
    # neardup's own choices beside the library: the fragment is never part of the key,
    # including a "#!" (the AJAX crawling scheme that url-normalize turns into a query)
    ("http://example.com/#!5753509/hello-world", "http://example.com/"),
    ("https://docs.google.com/spreadsheets/d/abcd/edit#gid=1234", "https://docs.google.com/spreadsheets/d/abcd/edit"),
]


@pytest.mark.parametrize(("url", "expected"), CHANGED)
def test_upstream_expected_changes(url, expected):
    assert normalize_url(url) == expected


@pytest.mark.parametrize(("host", "expected"), [
    ("site.com", "site.com"), ("SITE.COM", "site.com"), ("site.com.", "site.com"),
    ("пример.испытание", "xn--e1afmkfd.xn--80akhbyknj4f"), ("ExAmPle.РФ", "example.xn--p1ai"),
    ("faß.de", "xn--fa-hia.de"),                 # IDNA 2008 (as browsers), not IDNA 2003's fass.de
    ("ドメイン.テスト", "xn--eckwd4c7c.xn--zckzah"), ("domain.café", "domain.xn--caf-dma"),
    ("über.example", "xn--ber-goa.example"), ("example。com", "example.com"),
    ("xn--bcher-kva.de", "xn--bcher-kva.de"), ("ＥＸＡＭＰＬＥ.com", "example.com"),
    ("exa_mple.com", "exa_mple.com"),            # underscores occur in real host names
])
def test_idna_hosts(host, expected):
    assert normalize_url(f"https://{host}/x") == f"https://{expected}/x"
    assert host_of(normalize_url(f"https://{host}/x")) == expected


def test_ports():
    assert normalize_url("https://a.example:443/") == "https://a.example/"
    assert normalize_url("http://a.example:443/") == "http://a.example:443/"
    assert normalize_url("https://a.example:80/") == "https://a.example:80/"
    assert normalize_url("http://a.example:0080/x") == "http://a.example/x"
    assert normalize_url("ftp://a.example:21/f") == "ftp://a.example/f"
    assert normalize_url("http://a.example:/x") == "http://a.example/x"
    assert normalize_url("http://[2001:DB8::1]:80/a") == "http://[2001:db8::1]/a"
    assert normalize_url("http://[2001:db8::1]:8080/a") == "http://[2001:db8::1]:8080/a"
    assert normalize_url("http://[::1]:/a") == "http://[::1]/a"


def test_percent_encoding():
    # unreserved characters decoded, hex upper-cased, reserved escapes kept, the rest escaped
    assert normalize_url("http://a.example/%41%62%2d%5F%2e%7e") == "http://a.example/Ab-_.~"
    assert normalize_url("http://a.example/a%2fb%3f") == "http://a.example/a%2Fb%3F"
    assert normalize_url("http://a.example/ä€") == "http://a.example/%C3%A4%E2%82%AC"
    assert normalize_url("http://a.example/%c3%a4") == "http://a.example/%C3%A4"
    assert normalize_url("http://a.example/a\"b<c>^`{|}") == "http://a.example/a%22b%3Cc%3E%5E%60%7B%7C%7D"
    assert normalize_url("http://a.example/%zz") == "http://a.example/%25zz"
    # bytes that are no UTF-8 (Latin-1 forms of old sites) are kept, not replaced by U+FFFD
    assert normalize_url("http://a.example/?q=M%FCller") == "http://a.example/?q=M%FCller"
    assert normalize_url("http://a.example/?q=M%fcller") == "http://a.example/?q=M%FCller"
    assert normalize_url("http://a.example/?q=a%26b&r=%3D") == "http://a.example/?q=a%26b&r=%3D"
    assert normalize_url("http://a.example/?q=a+b") != normalize_url("http://a.example/?q=a%2Bb")


def test_dot_segments_and_empty_path():
    assert normalize_url("http://a.example") == "http://a.example/"
    assert normalize_url("http://a.example?x=1") == "http://a.example/?x=1"
    assert normalize_url("http://a.example/a/b/../../..") == "http://a.example/"
    assert normalize_url("http://a.example/.well-known/x") == "http://a.example/.well-known/x"
    assert normalize_url("http://a.example/a/%2E%2E/b") == "http://a.example/b"
    assert normalize_url("http://a.example/a?") == "http://a.example/a"


def test_scheme_host_fragment():
    assert normalize_url("HTTPS://WWW.Example.COM/Path#Frag") == "https://www.example.com/Path"
    assert normalize_url("  https://a.example/x  ") == "https://a.example/x"
    assert normalize_url("file:///tmp/a/../b") == "file:///tmp/b"


def test_tracking_parameters():
    u = ("https://a.example/p?id=7&utm_source=feed&UTM_Medium=rss&utm_campaign=x&gclid=1&fbclid=2"
         "&msclkid=3&dclid=4&yclid=5&mc_cid=6&mc_eid=7&_ga=8&igshid=9&_hsenc=10&mkt_tok=11&page=2")
    assert normalize_url(u) == "https://a.example/p?id=7&page=2"
    # only tracking: the query goes
    assert normalize_url("https://a.example/p?utm_source=x&utm_medium=y") == "https://a.example/p"
    # names that select content on some sites are kept
    keep = "https://a.example/p?ref=main&source=x&id=1&sid=2&session=3"
    assert normalize_url(keep) == keep
    # a name is matched after its own percent-decoding, and "&amp;" pasted from HTML
    assert normalize_url("https://a.example/p?utm%5Fsource=x&a=1") == "https://a.example/p?a=1"
    assert normalize_url("https://a.example/p?a=1&amp;utm_medium=feed") == "https://a.example/p?a=1"
    # a value is never matched
    assert normalize_url("https://a.example/p?q=utm_source") == "https://a.example/p?q=utm_source"
    assert "utm_*" in DEFAULT_TRACKING_PARAMS and "gclid" in DEFAULT_TRACKING_PARAMS


def test_config():
    none = UrlConfig(tracking_params=())
    assert normalize_url("https://a.example/?utm_source=x", none) == "https://a.example/?utm_source=x"
    extra = UrlConfig(drop_params=("PHPSESSID", "trk_*"))
    assert extra.drop_params == ("phpsessid", "trk_*")
    assert normalize_url("https://a.example/?phpsessid=1&trk_a=2&utm_term=3&b=4", extra) == "https://a.example/?b=4"
    sort = UrlConfig(sort_query=True)
    assert normalize_url("https://a.example/?b=2&a=2&b=1&a=1", sort) == "https://a.example/?a=2&a=1&b=2&b=1"
    assert normalize_url("https://a.example/?b=2&a=1") == "https://a.example/?b=2&a=1"   # the default keeps the order
    assert UrlConfig(drop_params=["x"]) == UrlConfig(drop_params=("x",))  # type: ignore[arg-type]
    assert hash(UrlConfig()) == hash(DEFAULT_URL_CONFIG)
    as_dict: dict[str, Any] = DEFAULT_URL_CONFIG.to_dict()
    assert UrlConfig(**as_dict) == DEFAULT_URL_CONFIG
    with pytest.raises(AttributeError):
        DEFAULT_URL_CONFIG.sort_query = True  # type: ignore[misc]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"drop_params": "utm_source"}, "not the string"),
    ({"drop_params": 5}, "not int"),
    ({"drop_params": ["a=b"]}, "is not a query parameter name"),
    ({"drop_params": [""]}, "is not a query parameter name"),
    ({"tracking_params": ["*x"]}, "is not a query parameter name"),
    ({"tracking_params": ["a b"]}, "is not a query parameter name"),
    ({"tracking_params": [None]}, "is not a query parameter name"),
    ({"sort_query": "yes"}, "sort_query must be true or false"),
])
def test_config_validation(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        UrlConfig(**kwargs)


@pytest.mark.parametrize(("url", "message"), [
    ("", "URL is empty"),
    ("   ", "URL is empty"),
    ("example.com/a", "has no supported scheme"),
    ("mailto:x@a.example", "has no supported scheme"),
    ("javascript:alert(1)", "has no supported scheme"),
    ("http://", "has no host"),
    ("http:example.com", "has no host"),
    ("http://a.example/a b", "whitespace or control characters"),
    ("http://a.example/\x00", "whitespace or control characters"),
    ("http://a.example:99999/", "malformed URL"),
    ("http://a.example:x/", "malformed URL"),
    ("http://[::1/", "malformed URL"),
    ("http://[::1]junk/", "text after its IPv6 address that is not a port: 'junk'"),
    ("http://[::1]x8080/", "text after its IPv6 address that is not a port: 'x8080'"),
    ("http://u@[::1]:80x/", "malformed URL"),
    ("http://a.example/\ud800", "lone surrogate"),
    ("http://" + "a" * 9000, "over the 8192 limit"),
    ("http://a<b>.example/", "has an invalid host"),
    ("http://" + "a" * 70 + ".example/", "has an invalid host"),
    ("http://./", "has an invalid host"),
    ("http://a.example/" + "ä" * 2000, "once normalised, over the 8192 limit"),
])
def test_bad_urls(url, message):
    with pytest.raises(URLError, match=message):
        normalize_url(url)
    if "invalid host" not in message and "once normalised" not in message:
        with pytest.raises(URLError, match=message):   # the same one-line messages as validate_url's
            validate_url(url)


def test_non_string():
    with pytest.raises(URLError, match="URL must be a string, not bytes"):
        normalize_url(b"http://a.example/")  # type: ignore[arg-type]


def test_helpers_keep_working():
    assert validate_url(" http://A.example/x#f ") == "http://A.example/x#f"
    assert host_of("HTTPS://Example.COM:443/a?b=1#frag") == "example.com"
    assert host_of("file:///x") == ""
    assert comparable_url("HTTPS://Example.COM:443/a?b=1#frag") == "https://example.com/a?b=1"
    assert comparable_url("HTTPS://Example.COM:443") == "https://example.com/"
    assert comparable_url("/relative/link") == "/relative/link"   # no valid URL: the old light form


def _path_has_empty_segment(url: str) -> bool:
    """Where neardup departs from url-normalize: ``/a//b`` keeps its empty segment (RFC 3986
    does not merge them, and servers such as web archives tell them apart)."""
    from urllib.parse import urlsplit

    return "//" in urlsplit(url).path


def test_empty_path_segments_are_kept():
    assert normalize_url("https://web.archive.org/web/2019/https://www.nytimes.com/a.html") == \
        "https://web.archive.org/web/2019/https://www.nytimes.com/a.html"
    assert normalize_url("http://a.example/a//b/../c") == "http://a.example/a//c"
    assert normalize_url("http://a.example/a//b") != normalize_url("http://a.example/a/b")


def test_the_key_is_url_normalize_plus_tracking():
    """Everything but the fragment, the query parameters and empty path segments comes from
    url-normalize unchanged (the fast paths and the host cache must not change a key)."""
    for url in UNCHANGED + [u for u, _ in CHANGED]:
        if "#" not in url and not _path_has_empty_segment(url):
            assert normalize_url(url, UrlConfig(tracking_params=())) == url_normalize(url), url


# -- properties ---------------------------------------------------------------------------

_chars = st.sampled_from(list("aZ09-._~!$&'()*+,;=:@/?%[]\"<>^`{|}\\") + ["%2e", "%2E", "%7e", "%41", "%C3%A4",
                                                                        "%FC", "%zz", "ä", "€", "..", ".", "//"])
_text = st.lists(_chars, max_size=12).map("".join)
_labels = st.one_of(st.sampled_from(["a", "Www", "xn--bcher-kva", "xn--zz", "-a", "a-", "a--b", "ß", "bücher", "_x",
                                     "a" * 63, "a" * 64, "", "0", "ＥＸ"]),
                    st.text(alphabet="abcXYZ019-_.", min_size=1, max_size=8))
_hosts = st.one_of(st.sampled_from(["a.example", "A.Example", "www.a.example", "bücher.de", "xn--bcher-kva.de",
                                    "127.0.0.1", "[2001:DB8::1]", "faß.de", "exa_mple.com", "a.example."]),
                   st.lists(_labels, min_size=1, max_size=4).map(".".join))
_ports = st.sampled_from(["", ":80", ":443", ":8080", ":0443", ":", "junk", "x8080", ":8o"])
_params = st.lists(st.tuples(st.sampled_from(["a", "B", "utm_source", "gclid", "q", "Ç", "%61", "amp;utm_x",
                                              "utm%5Fmedium", "x%3D"]), _text,
                             st.booleans()), max_size=5)


@st.composite
def urls(draw):
    scheme = draw(st.sampled_from(["http", "https", "HTTP", "ftp"]))
    query = "&".join(k + ("=" + v if eq else "") for k, v, eq in draw(_params))
    frag = draw(st.sampled_from(["", "#", "#x", "#!a/b"]))
    path = "/" + draw(_text).replace("?", "").replace("#", "")
    return f"{scheme}://{draw(_hosts)}{draw(_ports)}{path}" + (f"?{query.replace('#', '')}" if query else "") + frag


@settings(derandomize=True, max_examples=400, deadline=None)
@given(urls(), st.sampled_from([DEFAULT_URL_CONFIG, UrlConfig(sort_query=True), UrlConfig(tracking_params=())]))
def test_idempotent(url, config):
    try:
        key = normalize_url(url, config)
    except URLError:
        return
    assert normalize_url(key, config) == key
    assert "#" not in key
    assert validate_url(key) == key


@settings(derandomize=True, max_examples=300, deadline=None)
@given(urls())
def test_fast_paths_agree_with_the_library(url):
    try:
        key = normalize_url(url, UrlConfig(tracking_params=()))
    except URLError:
        return
    if not _path_has_empty_segment(url.partition("#")[0]):
        assert key == url_normalize(url.partition("#")[0])


# -- the simple-URL way (urls._SIMPLE_URL) keys a URL as the general way (urls._slow_key) does --
SIMPLE_EDGES = [
    "https://a.example", "https://a.example?x=1", "https://a.example/?", "https://a.example/a/./b", "https://a.example/a/..",
    "http://a.example/%7e?utm_source=x&q=%c3%a9", "https://a.example/x?a=1&&b=2&amp;utm_medium=z", "https://a--b.example/[x]@!",
    "https://" + "a" * 63 + ".example/", "https://" + "a" * 64 + ".example/", "https://a..example/", "https://a.example./",
    "https://127.0.0.1/x", "https://-.example/", "https://a.example/" + "x" * 8200, "https://a.example/?" + "%" * 3000,
    "https://a.example/x?q=a\"b", "https://a.example/x?q=ä", "https://a.example/x#f", "https://A.example/", "https://a.example:443/",
]


def _both_ways(url: str, config: UrlConfig) -> tuple[tuple[str, str], tuple[str, str]]:
    from neardup import urls as U

    def run(f: Any) -> tuple[str, str]:
        try:
            return "ok", f(url, config)
        except URLError as exc:
            return "error", str(exc)

    U._normalized.cache_clear()
    return run(U._slow_key), run(U._normalized)


@pytest.mark.parametrize("url", SIMPLE_EDGES)
@pytest.mark.parametrize("config", [DEFAULT_URL_CONFIG, UrlConfig(drop_params=("sid",), sort_query=True)])
def test_simple_urls_are_keyed_as_any_url(url: str, config: UrlConfig) -> None:
    general, fast = _both_ways(url, config)
    assert fast == general


@settings(derandomize=True, max_examples=400, deadline=None)
@given(urls(), st.sampled_from([DEFAULT_URL_CONFIG, UrlConfig(sort_query=True), UrlConfig(tracking_params=())]))
def test_simple_urls_are_keyed_as_any_url_generated(url: str, config: UrlConfig) -> None:
    general, fast = _both_ways(url, config)
    assert fast == general


@settings(derandomize=True, max_examples=400, deadline=None)
@given(urls())
def test_host_of_simple_urls_as_urlsplit_reads_them(url: str) -> None:
    from urllib.parse import urlsplit

    try:
        expected = (urlsplit(url).hostname or "").lower()
    except ValueError:
        expected = ""
    assert host_of(url) == expected
    for edge in SIMPLE_EDGES:
        assert host_of(edge) == (urlsplit(edge).hostname or "").lower()


@settings(derandomize=True, max_examples=400, deadline=None)
@given(urls())
def test_origin_of_simple_urls_as_urlsplit_reads_them(url: str) -> None:
    from urllib.parse import urlsplit

    from neardup.urls import origin_of

    def by_urlsplit(u: str) -> str:
        try:
            parts = urlsplit(u)
            host, port = (parts.hostname or "").lower(), parts.port
        except ValueError:
            return ""
        if not host or port is None or port == {"http": 80, "https": 443, "ftp": 21}.get(parts.scheme.lower()):
            return host
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    assert origin_of(url) == by_urlsplit(url)
    for edge in SIMPLE_EDGES:
        assert origin_of(edge) == by_urlsplit(edge)
