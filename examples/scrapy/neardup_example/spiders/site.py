"""The example spider: every page of the local sample site, following its navigation links."""

from __future__ import annotations

import json

import scrapy
from scrapy.http import HtmlResponse


class SiteSpider(scrapy.Spider):
    name = "site"

    async def start(self):
        # only the site's navigation links are followed (nav.site): the site and its mirror
        yield scrapy.Request(self.settings.get("SITE_URL"))

    def parse(self, response):
        if not isinstance(response, HtmlResponse):
            return
        verdict = response.meta.get("neardup") or {}
        yield {"url": response.url, "status": verdict.get("status"), "version": verdict.get("version"),
               "canonical_url": verdict.get("canonical_url")}
        for href in response.css("nav.site a::attr(href)").getall():
            yield response.follow(href)

    def closed(self, reason):
        out = self.settings.get("STATS_OUT")
        if out:
            stats = {k: v for k, v in self.crawler.stats.get_stats().items() if isinstance(v, (int, float, str))}
            with open(out, "w") as fh:
                json.dump(stats, fh, indent=1, sort_keys=True)
