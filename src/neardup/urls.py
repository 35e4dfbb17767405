"""URL validation and the small URL helpers the store and canonical policies need.

>>> host_of("HTTPS://Example.COM:443/a?b=1#frag")
'example.com'
>>> comparable_url("HTTPS://Example.COM:443/a?b=1#frag")
'https://example.com/a?b=1'
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

from neardup.errors import URLError

SCHEMES = ("http", "https", "file", "ftp")
_DEFAULT_PORTS = {"http": 80, "https": 443, "ftp": 21}
MAX_URL_LENGTH = 8192
_BAD_CHAR = re.compile(r"[\s\x00-\x1f]")  # \s is str.isspace's set


def validate_url(url: str) -> str:
    """Return ``url`` stripped, or raise :class:`URLError` naming what is wrong with it."""
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
        port = parts.port
    except ValueError as exc:
        raise URLError(f"malformed URL {url[:200]!r}: {exc}") from None
    if parts.scheme.lower() not in SCHEMES:
        raise URLError(f"URL {url[:200]!r} has no supported scheme ({', '.join(SCHEMES)})")
    if parts.scheme.lower() != "file" and not parts.hostname:
        raise URLError(f"URL {url[:200]!r} has no host")
    del port
    return url


def host_of(url: str) -> str:
    """Lower-case host name of a URL ('' for file: URLs)."""
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def comparable_url(url: str) -> str:
    """URL form used to compare a ``rel=canonical`` link with page URLs: lower-case scheme
    and host, default port and fragment dropped."""
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
