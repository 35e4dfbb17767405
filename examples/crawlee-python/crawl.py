"""Crawl a site with Crawlee for Python (ParselCrawler) and neardup (:mod:`neardup.crawlee`).

Every link is decided before it is queued (``Detector.should_fetch``: skipped URLs never
become requests, so Crawlee counts no failed request for them), every HTML page is added,
and duplicates are dropped (neither stored nor followed) or tagged. Only the links under
``/pages/`` and ``/copies/`` of the start URL's site are followed (``noisy_site.py``'s
articles), unless ``--follow`` names another regular expression.

    python noisy_site.py --port 8000 &
    python crawl.py http://127.0.0.1:8000/ --db crawl.db --out pages.jsonl
    python crawl.py http://127.0.0.1:8000/ --service http://127.0.0.1:8080   # neardup serve

It prints (and with ``--stats-out``, writes as JSON) Crawlee's final statistics beside
neardup's counts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

from crawlee import ConcurrencySettings
from crawlee.crawlers import ParselCrawler, ParselCrawlingContext
from crawlee.storage_clients import MemoryStorageClient

from neardup.crawlee import NeardupCrawlee

sys.path.insert(0, str(Path(__file__).resolve().parent))
from noisy_site import scope_pattern  # noqa: E402


async def crawl(start: str, target: str, *, token: str | None = None, on_duplicate: str = "drop",
                follow: str | None = None, concurrency: int = 4, out: Path | None = None) -> dict[str, Any]:
    """One crawl from ``start`` with neardup on ``target`` (a store, or the service's URL);
    returns Crawlee's final statistics (``crawlee``), neardup's counts (``neardup``) and the
    stored items (``items``)."""
    scope = [re.compile(follow or scope_pattern(start))]
    async with NeardupCrawlee.open(target, token=token, on_duplicate=on_duplicate) as nd:
        crawler = ParselCrawler(
            storage_client=MemoryStorageClient(),  # a fresh queue and dataset each run; neardup keeps the memory
            concurrency_settings=ConcurrencySettings(max_concurrency=concurrency, desired_concurrency=concurrency),
            max_request_retries=1,
        )

        @crawler.router.default_handler
        @nd.handler  # adds the page first; with on_duplicate="drop" a duplicate never gets here
        async def handle(context: ParselCrawlingContext) -> None:
            verdict = nd.verdict(context) or {}
            await context.push_data({
                "url": context.request.url,
                "title": context.selector.css("title::text").get(),
                "status": verdict.get("status"),
                "version": verdict.get("version"),
                "canonical_url": verdict.get("canonical_url"),
            })
            await nd.enqueue_links(context, include=scope)  # should_fetch before the queue

        # the start URL and the store's due URLs (a recrawl reaches the pages behind fresh ones)
        final = await crawler.run(await nd.filter_requests([start, *await nd.due(limit=100_000)]))
        items = (await crawler.get_data()).items
        if out is not None:
            out.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
        return {"crawlee": final.to_dict(), "neardup": dict(nd.stats), "items": items}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("start", help="the start URL")
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--db", help="a SQLite store file or a postgresql:// URL")
    where.add_argument("--service", help="the URL of `neardup serve`")
    ap.add_argument("--token", help="the service's bearer token")
    ap.add_argument("--on-duplicate", choices=("drop", "tag"), default="drop")
    ap.add_argument("--follow", help="a regular expression of the URLs to follow (default: the site's articles)")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--out", type=Path, help="write the stored items here (JSON lines)")
    ap.add_argument("--stats-out", type=Path, help="write the statistics here (JSON)")
    args = ap.parse_args()
    result = asyncio.run(crawl(args.start, args.db or args.service, token=args.token, on_duplicate=args.on_duplicate,
                               follow=args.follow, concurrency=args.concurrency, out=args.out))
    stats = {"crawlee": result["crawlee"], "neardup": result["neardup"]}
    print(json.dumps(stats, indent=2, sort_keys=True))
    if args.stats_out is not None:
        args.stats_out.write_text(json.dumps(stats, indent=2, sort_keys=True), encoding="utf-8")


if __name__ == "__main__":
    main()
