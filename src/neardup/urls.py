"""URL identity: validation, the store key of a URL (:func:`normalize_url`) and the small URL
helpers the store and canonical policies need.

A crawler meets one page under many spellings of its URL: ``HTTPS://Example.COM:443/a``,
``https://example.com/a#comments``, ``https://example.com/./a?utm_source=feed``.
:func:`normalize_url` writes them all as one key, ``https://example.com/a``, so that a
re-fetch of a page finds its stored version whatever spelling the link used. The syntax-based
normalisations of RFC 3986 (section 6.2.2) come from the ``url-normalize`` library
(``docs/urls.md`` compares it with w3lib and courlan); neardup adds dropping the fragment,
the tracking parameters of :class:`UrlConfig` and, optionally, sorting the query.

>>> normalize_url("HTTPS://Example.COM:443/a/./b/../c?utm_source=feed&id=7#comments")
'https://example.com/a/c?id=7'
>>> host_of("HTTPS://Example.COM:443/a?b=1#frag")
'example.com'
>>> comparable_url("HTTPS://Example.COM:443/a?b=1#frag")
'https://example.com/a?b=1'
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import SplitResult, urlsplit, urlunsplit

from url_normalize.normalize_host import normalize_host as _lib_normalize_host
from url_normalize.normalize_port import normalize_port as _lib_normalize_port
from url_normalize.normalize_query import process_query_param as _lib_query_param
from url_normalize.normalize_userinfo import normalize_userinfo as _lib_normalize_userinfo
from url_normalize.tools import RESERVED_CHARACTERS as _RESERVED
from url_normalize.tools import normalize_component as _lib_normalize_component

from neardup.errors import ConfigError, URLError

SCHEMES = ("http", "https", "file", "ftp")
_DEFAULT_PORTS = {"http": 80, "https": 443, "ftp": 21}
MAX_URL_LENGTH = 8192
_BAD_CHAR = re.compile(r"[\s\x00-\x1f]")  # \s is str.isspace's set

#: Query parameters that only attribute a click or a campaign and never select content,
#: dropped from the store key (matched case-insensitively; ``NAME*`` is a prefix). From the
#: lists browsers and crawlers strip: Firefox's and Brave's query stripping, ClearURLs'
#: global rules, AdGuard's TrackParamFilter. Left out on purpose: names that some sites use
#: to select content (``ref``, ``source``, ``id``, ``sid``, ``session``, ``si``): those are
#: learned per host from evidence (:mod:`neardup.crawl.urlrules`), never assumed.
DEFAULT_TRACKING_PARAMS: tuple[str, ...] = (
    # Google Analytics / Ads campaign and click ids
    "utm_*", "gclid", "gclsrc", "dclid", "gbraid", "wbraid", "gad_source", "srsltid", "_ga", "_gl",
    # Matomo / Piwik campaigns
    "mtm_*", "pk_campaign", "pk_kwd", "pk_keyword", "pk_source", "pk_medium", "pk_content", "pk_cid",
    # social networks and other ad platforms
    "fbclid", "igshid", "igsh", "msclkid", "twclid", "ttclid", "li_fat_id", "epik",
    "yclid", "ysclid", "_openstat", "s_kwcid", "ef_id",
    # e-mail marketing (Mailchimp, HubSpot, Marketo, Omeda, Vero, Klaviyo, Wicked Reports)
    "mc_cid", "mc_eid", "_hsenc", "_hsmi", "__hssc", "__hstc", "__hsfp", "hsctatracking",
    "mkt_tok", "oly_anon_id", "oly_enc_id", "vero_id", "vero_conv", "_kx", "wickedid",
)
_PARAM_NAME = re.compile(r"[^\s=&#*]+\*?")
CLEAN_PATH = re.compile(r"/[A-Za-z0-9\-._~:/\[\]@!$&'()*+,;=]*")      # what url-normalize leaves as is
_CLEAN_PARAM = re.compile(r"[A-Za-z0-9\-._~:/?\[\]@!$'()*+,;]*")
_HOST = re.compile(r"[a-z0-9\-._~!$&'()*+,;=]+|\[[0-9a-f:.]+(%[^\]]*)?\]")


def _names(value: Iterable[str], what: str) -> tuple[str, ...]:
    if isinstance(value, str):
        raise ConfigError(f"{what} must be a list of parameter names, not the string {value!r}")
    try:
        names = tuple(value)
    except TypeError:
        raise ConfigError(f"{what} must be a list of parameter names, not {type(value).__name__}") from None
    for name in names:
        if not isinstance(name, str) or not _PARAM_NAME.fullmatch(name):
            raise ConfigError(f"{what}: {name!r} is not a query parameter name (no spaces, '=', '&', '#'; "
                              f"'*' only at the end, for a prefix)")
    return tuple(dict.fromkeys(n.lower() for n in names))


@dataclass(frozen=True)
class UrlConfig:
    """How :func:`normalize_url` writes a URL's store key.

    - ``tracking_params``: query parameters dropped as tracking (default
      :data:`DEFAULT_TRACKING_PARAMS`; ``()`` keeps them all);
    - ``drop_params``: further parameters to drop (a site's own session or campaign names);
    - ``sort_query``: sort the query parameters by name (a stable sort: repeated names keep
      their order). Off by default: the order of parameters is significant to a server
      (RFC 3986), and a host whose order does not matter is learned from evidence (the
      ``sort-params`` rule of :mod:`neardup.crawl.urlrules`).

    Names are matched case-insensitively; ``NAME*`` drops every parameter starting with
    ``NAME``.

    >>> cfg = UrlConfig(drop_params=["sessionid", "trk*"], sort_query=True)
    >>> normalize_url("https://a.example/p?z=1&sessionid=9&trkSrc=x&a=2", cfg)
    'https://a.example/p?a=2&z=1'
    >>> UrlConfig(drop_params=["a b"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    neardup.errors.ConfigError: drop_params: 'a b' is not a query parameter name (no spaces, ...)
    """

    tracking_params: tuple[str, ...] = DEFAULT_TRACKING_PARAMS
    drop_params: tuple[str, ...] = ()
    sort_query: bool = False
    _exact: frozenset[str] = field(init=False, repr=False, compare=False)
    _prefixes: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        tracking = _names(self.tracking_params, "tracking_params")
        drop = _names(self.drop_params, "drop_params")
        if not isinstance(self.sort_query, bool):
            raise ConfigError(f"sort_query must be true or false, not {self.sort_query!r}")
        every = tracking + drop
        object.__setattr__(self, "tracking_params", tracking)
        object.__setattr__(self, "drop_params", drop)
        object.__setattr__(self, "_exact", frozenset(n for n in every if not n.endswith("*")))
        object.__setattr__(self, "_prefixes", tuple(n[:-1] for n in every if n.endswith("*")))

    def drops(self, name: str) -> bool:
        """Whether query parameter ``name`` is left out of the key.

        >>> DEFAULT_URL_CONFIG.drops("UTM_Campaign"), DEFAULT_URL_CONFIG.drops("id")
        (True, False)
        """
        name = name.lower()
        return name in self._exact or (bool(self._prefixes) and name.startswith(self._prefixes))

    def to_dict(self) -> dict[str, object]:
        """The settings as JSON-ready values (the inverse of ``UrlConfig(**d)``).

        >>> UrlConfig(tracking_params=(), drop_params=["SID"]).to_dict()
        {'tracking_params': [], 'drop_params': ['sid'], 'sort_query': False}
        """
        return {"tracking_params": list(self.tracking_params), "drop_params": list(self.drop_params),
                "sort_query": self.sort_query}


DEFAULT_URL_CONFIG = UrlConfig()


def _checked(url: str) -> tuple[str, SplitResult]:
    if not isinstance(url, str):
        raise URLError(f"URL must be a string, not {type(url).__name__}")
    url = url.strip()
    if not url:
        raise URLError("URL is empty")
    if len(url) > MAX_URL_LENGTH:
        raise URLError(f"URL is {len(url)} characters long, over the {MAX_URL_LENGTH} limit")
    if _BAD_CHAR.search(url):
        raise URLError(f"URL contains whitespace or control characters: {url[:200]!r}")
    if not url.isascii():
        try:
            url.encode("utf-8")
        except UnicodeEncodeError:
            raise URLError(f"URL contains a lone surrogate (not valid Unicode): {url[:200]!r}") from None
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise URLError(f"malformed URL {url[:200]!r}: {exc}") from None
    hostport = parts.netloc.rpartition("@")[2]
    if hostport.startswith("["):  # urlsplit ignores what follows "]" unless it starts with ":"
        after = hostport.partition("]")[2]
        if after and not _PORT_AFTER_BRACKET.fullmatch(after):
            raise URLError(f"URL {url[:200]!r} has text after its IPv6 address that is not a port: {after[:100]!r}")
    if parts.scheme.lower() not in SCHEMES:
        raise URLError(f"URL {url[:200]!r} has no supported scheme ({', '.join(SCHEMES)})")
    if parts.scheme.lower() != "file" and not parts.hostname:
        raise URLError(f"URL {url[:200]!r} has no host")
    return url, parts


def validate_url(url: str) -> str:
    """Return ``url`` stripped, or raise :class:`URLError` naming what is wrong with it.

    >>> validate_url("  https://a.example/x ")
    'https://a.example/x'
    >>> validate_url("mailto:someone@a.example")
    Traceback (most recent call last):
    ...
    neardup.errors.URLError: URL 'mailto:someone@a.example' has no supported scheme (http, https, file, ftp)
    """
    return _checked(url)[0]


_PORT_AFTER_BRACKET = re.compile(r":[0-9]*")
LDH_HOST = re.compile(r"[a-z0-9-]{1,63}(?:\.[a-z0-9-]{1,63})*")


@lru_cache(maxsize=1 << 16)
def _host(host: str) -> str | None:
    """The IDNA (punycode) lower-case form of a host name, None when it is not one. Cached
    (a crawl meets few hosts per URL, and IDNA is half the cost of a key); a lower-case
    ASCII name of non-empty labels is its own form (url-normalize returns it unchanged)."""
    if LDH_HOST.fullmatch(host):
        return host
    try:
        out = _lib_normalize_host(host)
    except (UnicodeError, ValueError):
        return None
    return out if _HOST.fullmatch(out) else None


def _query(query: str, config: UrlConfig) -> str:
    kept: list[tuple[str, str]] = []
    for param in query.split("&"):
        if not param:
            continue
        key, sep, value = param.partition("=")
        key = key if _CLEAN_PARAM.fullmatch(key) else _lib_query_param(key)
        if config.drops(key[4:] if key.startswith("amp;") else key):  # "&amp;utm_medium=" pasted from HTML
            continue
        value = value if _CLEAN_PARAM.fullmatch(value) else _lib_query_param(value)
        kept.append((key, sep + value))
    if config.sort_query:
        kept.sort(key=lambda kv: kv[0])
    return "&".join(k + v for k, v in kept)


def normalize_url(url: str, config: UrlConfig | None = None) -> str:
    """The store key of ``url``: validated as :func:`validate_url` does (:class:`URLError`
    otherwise), the fragment dropped, scheme and host lower-cased, the host in IDNA
    (punycode), the default port dropped (80 for http, 443 for https, 21 for ftp),
    percent-encoding normalised (unreserved characters decoded, hex digits upper-cased,
    what must be escaped escaped, UTF-8 NFC), dot segments and empty segments resolved, an
    empty path written ``/``, empty query parameters and the tracking parameters of
    ``config`` (:data:`DEFAULT_URL_CONFIG`) dropped. Idempotent:
    ``normalize_url(normalize_url(u)) == normalize_url(u)``.

    >>> normalize_url("http://Bücher.example:80/%7euser/a%2fb/../ä?gclid=x&q=%c3%a9")
    'http://xn--bcher-kva.example/~user/%C3%A4?q=%C3%A9'
    >>> normalize_url("https://example.com")
    'https://example.com/'
    >>> normalize_url("https://example.com/a b")
    Traceback (most recent call last):
    ...
    neardup.errors.URLError: URL contains whitespace or control characters: 'https://example.com/a b'
    """
    if not isinstance(url, str):
        _checked(url)  # the same typed error for a non-string
    return _normalized(url, DEFAULT_URL_CONFIG if config is None else config)


#: A URL that is already its own key but for its query: ``http(s)://`` a lower-case LDH host
#: (:data:`LDH_HOST`), no port, user or fragment, a path of characters url-normalize leaves as
#: they are without dot segments (:data:`CLEAN_PATH`), and a printable ASCII query. Most URLs
#: a crawler meets are; :func:`_normalized` keys them without ``urlsplit`` (the same key:
#: tests/test_urls.py compares the two ways).
_SIMPLE_URL = re.compile(r"(https?://[a-z0-9-]{1,63}(?:\.[a-z0-9-]{1,63})*)(/[A-Za-z0-9\-._~:/\[\]@!$&'()*+,;=]*)?"
                         r"(?:\?([!-\"$-~]*))?")


@lru_cache(maxsize=1 << 14)
def _normalized(url: str, cfg: UrlConfig) -> str:
    """:func:`normalize_url`, remembered: one page's URL is normalised several times on its way
    through the Detector (its key, its canonical rank), and a crawl repeats URLs."""
    simple = _SIMPLE_URL.fullmatch(url) if len(url) <= MAX_URL_LENGTH else None
    if simple is not None and "/." not in url:
        return _simple_key(simple.group(1), simple.group(2) or "/", simple.group(3), cfg)
    return _slow_key(url, cfg)


def _simple_key(origin: str, path: str, query: str | None, cfg: UrlConfig) -> str:
    """The key of a URL :data:`_SIMPLE_URL` matched: its query normalised, as the general way does."""
    query = _query(query, cfg) if query else ""
    key = origin + path + ("?" + query if query else "")
    if len(key) > MAX_URL_LENGTH:  # escaping lengthens: a key is always a valid URL
        raise URLError(f"URL is {len(key)} characters long once normalised, over the {MAX_URL_LENGTH} limit")
    return key


def _slow_key(url: str, cfg: UrlConfig) -> str:
    """The key of any URL (:func:`normalize_url`), by ``urlsplit``."""
    url, parts = _checked(url)
    scheme = parts.scheme.lower()
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if hostport.startswith("["):
        host, _, port = hostport.partition("]")
        host += "]"
        port = port[1:]
    else:
        host, _, port = hostport.partition(":")
    if host:
        name = _host(host.lower() if host.isascii() else host)
        if not name:
            raise URLError(f"URL {url[:200]!r} has an invalid host {host[:100]!r}")
        host = name
    elif scheme != "file":
        raise URLError(f"URL {url[:200]!r} has no host")
    netloc = host
    if at:
        netloc = _lib_normalize_userinfo(userinfo + at) + netloc
    if port:
        port = _lib_normalize_port(port, scheme)
        if port:
            netloc += ":" + port
    path = parts.path
    if not (CLEAN_PATH.fullmatch(path) and "/." not in path):
        path = _normalize_path(path)
    query = _query(parts.query, cfg) if parts.query else ""
    key = urlunsplit((scheme, netloc, path, query, ""))
    if len(key) > MAX_URL_LENGTH:  # escaping lengthens: a key is always a valid URL
        raise URLError(f"URL is {len(key)} characters long once normalised, over the {MAX_URL_LENGTH} limit")
    return key


def _normalize_path(path: str) -> str:
    """A path's canonical form: percent-encoding normalised by url-normalize's component
    rule (reserved escapes such as ``%2F`` kept, hex upper-cased, UTF-8 NFC), then dot
    segments removed as RFC 3986 section 5.2.4 says. Empty segments are kept: ``/a//b`` and
    ``/a/b`` may be different resources (an archive's ``/web/2019/https://host/...``), so
    collapsing them, as url-normalize does, would merge URLs a server tells apart.

    >>> _normalize_path("/web/2019/https://a.example/./x/../y%7e")
    '/web/2019/https://a.example/y~'
    >>> _normalize_path("")
    '/'
    """
    path = _lib_normalize_component(path, "~:/[]@!$&'()*+,;=", _RESERVED)
    out: list[str] = []
    segments = path.split("/")
    for i, part in enumerate(segments):
        if part == ".":
            if i == len(segments) - 1:
                out.append("")
        elif part == "..":
            if len(out) > 1:
                out.pop()
            if i == len(segments) - 1:
                out.append("")
        else:
            out.append(part)
    path = "/".join(out)
    return path if path.startswith("/") else "/" + path


def _simple_host(url: str) -> str | None:
    """The host of a URL :data:`_SIMPLE_URL` matches (a fragment may follow; most URLs, every
    simple key), read without ``urlsplit``; None for any other URL."""
    simple = _SIMPLE_URL.match(url)
    if simple is not None and url[simple.end():simple.end() + 1] in ("", "#"):
        return simple.group(1).partition("://")[2]
    return None


def host_of(url: str) -> str:
    """Lower-case host name of a URL ('' for file: URLs).

    >>> host_of("https://WWW.Example.com:8080/x")
    'www.example.com'
    """
    simple = _simple_host(url)
    if simple is not None:
        return simple
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def origin_of(url: str) -> str:
    """The origin a URL's host figures count under: its lower-case host, with the port where
    it is not the scheme's default (``host:port``, an IPv6 address bracketed), '' for file:
    URLs. A site and its mirror on another port are two origins; ``http`` and ``https`` on
    their default ports are one (sites serve one content under both; the ``scheme-alias``
    rule says whether they do).

    >>> origin_of("https://WWW.Example.com:8080/x"), origin_of("http://example.com:80/")
    ('www.example.com:8080', 'example.com')
    >>> origin_of("http://[::1]:8701/"), origin_of("https://[::1]/")
    ('[::1]:8701', '::1')
    """
    simple = _simple_host(url)  # no port
    if simple is not None:
        return simple
    try:
        parts = urlsplit(url)
        host, port = (parts.hostname or "").lower(), parts.port
    except ValueError:
        return ""
    if not host or port is None or port == _DEFAULT_PORTS.get(parts.scheme.lower()):
        return host
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def origin_host(origin: str) -> str:
    """The host name of an origin key (:func:`origin_of`): the port set aside.

    >>> origin_host("a.example:8080"), origin_host("[::1]:8701"), origin_host("::1"), origin_host("a.example")
    ('a.example', '::1', '::1', 'a.example')
    """
    if origin.startswith("["):
        return origin[1:origin.find("]")] if "]" in origin else origin
    if origin.count(":") == 1:
        return origin.split(":", 1)[0]
    return origin


def url_at(scheme: str, origin: str, rest: str) -> str:
    """The URL of path-and-query ``rest`` at an origin key (:func:`origin_of`).

    >>> url_at("http", "a.example:8080", "/x"), url_at("https", "::1", "/")
    ('http://a.example:8080/x', 'https://[::1]/')
    """
    bare_ipv6 = origin.count(":") > 1 and not origin.startswith("[")
    return f"{scheme}://[{origin}]{rest}" if bare_ipv6 else f"{scheme}://{origin}{rest}"


def comparable_url(url: str) -> str:
    """URL form used to compare a ``rel=canonical`` link with page URLs: the store key
    (:func:`normalize_url`), or for a link that is no valid URL, lower-case scheme and host
    with the default port and fragment dropped.

    >>> comparable_url("https://example.com/%7ea?utm_medium=rss#top")
    'https://example.com/~a'
    >>> comparable_url("HTTPS://Example.COM:443")
    'https://example.com/'
    """
    try:
        return normalize_url(url)
    except URLError:
        pass
    try:
        p = urlsplit(url.strip())
        scheme = p.scheme.lower()
        host = (p.hostname or "").lower()
        port = p.port
    except ValueError:
        return url
    netloc = host if port in (None, _DEFAULT_PORTS.get(scheme)) else f"{host}:{port}"
    if p.username:
        netloc = f"{p.username}@{netloc}"
    return urlunsplit((scheme, netloc, p.path or "/", p.query, ""))


def comparable_link(link: str | None) -> str | None:
    """The comparable form (:func:`comparable_url`) of a ``rel=canonical`` link, None for none:
    how the canonical policy and the store match a page's URL to the links that name it."""
    return comparable_url(link) if link else None
