"""What a store tells a crawler before the fetch: URL rules, host signals, templates, the recrawl schedule.
(The wing's face: its public names, defined in its modules.)"""

from neardup.crawl.schedule import MAX_REVISIT, MIN_REVISIT, UrlHistory, change_rate, next_fetch, schedule
from neardup.crawl.signals import MAX_HOST_STATES, CrawlSignals

__all__ = [
    "CrawlSignals",
    "MAX_HOST_STATES",
    "MAX_REVISIT",
    "MIN_REVISIT",
    "UrlHistory",
    "change_rate",
    "next_fetch",
    "schedule",
]
