"""Settings of the example crawl: neardup in front of every fetch (see neardup.scrapy)."""

BOT_NAME = "neardup_example"
SPIDER_MODULES = ["neardup_example.spiders"]
NEWSPIDER_MODULE = "neardup_example.spiders"

DOWNLOADER_MIDDLEWARES = {"neardup.scrapy.NeardupDownloaderMiddleware": 950}
SPIDER_MIDDLEWARES = {"neardup.scrapy.NeardupSpiderMiddleware": 50}
NEARDUP_DB = "crawl.db"            # a SQLite store; or "postgresql://...", or NEARDUP_URL + NEARDUP_TOKEN
NEARDUP_ON_DUPLICATE = "drop"      # or "tag": response.meta["neardup"] holds the verdict
NEARDUP_FOLLOW_DUPLICATES = False  # with "tag": follow links found on duplicate pages?
NEARDUP_EXTRACTOR = "fast"
NEARDUP_PROCESS = True             # the detector in a process of its own (the default): the reactor never waits
NEARDUP_THREADS = 2                # with NEARDUP_PROCESS = False or NEARDUP_URL: worker threads

SITE_URL = "http://127.0.0.1:8000/"
STATS_OUT = None                   # a JSON file for the final stats (the tests read it)

ROBOTSTXT_OBEY = False             # a local test site
CONCURRENT_REQUESTS = 1            # one fetch at a time: the same crawl order on every run
CLOSESPIDER_PAGECOUNT = 400        # a bound for the calendar trap when neardup is off
TELNETCONSOLE_ENABLED = False
LOG_LEVEL = "INFO"
