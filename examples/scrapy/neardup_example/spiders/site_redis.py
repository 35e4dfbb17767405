"""The example spider for a distributed crawl: any number of crawler processes on any
machines share one request queue and one request dupefilter in Redis (scrapy-redis), and
one neardup store in Redis (``NEARDUP_DB=redis://...``), so a page one worker stored is a
known duplicate for every other worker, and each distinct content is ``new`` exactly once.

Run as many as you like, each one::

    scrapy crawl site_redis -s REDIS_URL=redis://HOST:6379/0 \\
        -s NEARDUP_DB='redis://HOST:6379/0?prefix=crawl' -O worker-N.jsonl

Every worker sends the site's first URL (the shared dupefilter lets one through); a worker
whose queue runs dry waits ``MAX_IDLE_TIME_BEFORE_CLOSE`` seconds for the others' links
before it closes (it never blocks its reactor while it waits).
"""

from __future__ import annotations

from typing import Any

from scrapy_redis.spiders import RedisMixin

from neardup_example.spiders.site import SiteSpider


class RedisSiteSpider(RedisMixin, SiteSpider):
    name = "site_redis"
    custom_settings = {
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",  # the request queue in Redis, shared by every worker
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",  # each request fetched by one worker only
        "SCHEDULER_PERSIST": True,  # a worker that finishes leaves the queue (and the seen requests) to the others
        "MAX_IDLE_TIME_BEFORE_CLOSE": 3,  # seconds a worker with nothing to fetch waits for the others' links
        "CONCURRENT_REQUESTS": 2,
    }

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> RedisSiteSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        spider.setup_redis(crawler)
        return spider
