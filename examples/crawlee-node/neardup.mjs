// neardup's HTTP service (`neardup serve`) in a Crawlee (Node) crawl: decide before a link is
// queued, add each HTML page after the fetch, drop or tag duplicates.
//
//   const nd = new Neardup('http://127.0.0.1:8080', { token, onDuplicate: 'drop' });
//   const crawler = new CheerioCrawler({
//       requestHandler: nd.handler(async (context) => {      // adds the page; a duplicate never gets here
//           await context.pushData({ url: context.request.url });
//           await nd.enqueueLinks(context, { regexps: [/\/articles\//] });   // skipped URLs never become requests
//       }),
//   });
//   await crawler.run(await nd.filterUrls(['https://example.com/']));
//
// Crawlee can drop a queued request only by throwing in a pre-navigation hook: a failed
// request, retried and counted in the crawler's statistics. So the decision is made before
// the request queue. `transformRequestFunction` is synchronous (it cannot wait for the
// service), so `enqueueLinks` below runs Crawlee's own `enqueueLinks` twice: first with a
// transformRequestFunction that only collects the links Crawlee would queue (its selector,
// strategy, globs, regexps, exclude and the user's own transformRequestFunction applied) and
// queues none, then, once `GET /v1/should-fetch` has answered for all of them, with the URLs
// to fetch. Where a skip names the copy to keep (a known duplicate's `canonical_url`, a
// rule's known page), that URL is queued instead (Crawlee's request keys drop it when it was
// queued already). After the fetch, `POST /v1/pages` adds the page.
//
// An error of the service (unreachable, a refused page) never stops the crawl: the URL is
// queued, the page passes untagged, and it is counted (`should_fetch_error`, `error`).
// Counts in `nd.stats`, named as neardup.crawlee's (Python) and the Scrapy middleware's.

const DUPLICATE = new Set(['exact', 'near']);

/**
 * A verdict of a duplicate that is not its cluster's canonical copy: the page to drop, whose links are not
 * followed. A duplicate may be the canonical copy (the one its cluster's pages name with rel=canonical): it is kept.
 */
export function isDroppedCopy(verdict) {
    return Boolean(verdict) && DUPLICATE.has(verdict.status)
        && (verdict.page_id == null || verdict.page_id !== verdict.canonical_id);
}
// the skip reasons whose answer names the URL to fetch instead
const INSTEAD = new Set(['known-duplicate', 'rule']);

async function mapLimit(items, limit, fn) {
    const out = new Array(items.length);
    let next = 0;
    async function worker() {
        while (next < items.length) {
            const i = next++;
            out[i] = await fn(items[i], i);
        }
    }
    await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
    return out;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export class Neardup {
    /**
     * @param {string} baseUrl the service, e.g. http://127.0.0.1:8080
     * @param {object} [options]
     * @param {string} [options.token] its bearer token
     * @param {'drop'|'tag'} [options.onDuplicate] drop: a duplicate never reaches the handler; tag: it does,
     *     its verdict in request.userData.neardup
     * @param {boolean} [options.followDuplicates] with tag: follow the links of a duplicate page
     * @param {number} [options.maxAge] skip known URLs fetched less than this many seconds ago
     * @param {number} [options.concurrency] should-fetch calls in flight at once
     * @param {number} [options.timeoutMs] per service call
     */
    constructor(baseUrl, { token, onDuplicate = 'drop', followDuplicates = false, maxAge, concurrency = 8,
        timeoutMs = 30000 } = {}) {
        if (!['drop', 'tag'].includes(onDuplicate)) throw new Error(`onDuplicate must be drop or tag, got ${onDuplicate}`);
        this.baseUrl = baseUrl.replace(/\/+$/, '');
        this.headers = token ? { Authorization: `Bearer ${token}` } : {};
        this.onDuplicate = onDuplicate;
        this.followDuplicates = followDuplicates;
        this.maxAge = maxAge;
        this.concurrency = concurrency;
        this.timeoutMs = timeoutMs;
        this.started = Date.now() / 1000; // a URL the store holds from after this was fetched in this crawl
        this.stats = {};
    }

    count(name, n = 1) {
        this.stats[name] = (this.stats[name] ?? 0) + n;
    }

    async call(method, path, body) {
        for (let attempt = 0; ; attempt++) {
            const response = await fetch(this.baseUrl + path, {
                method,
                headers: { ...this.headers, ...(body ? { 'Content-Type': 'application/json' } : {}) },
                body: body ? JSON.stringify(body) : undefined,
                signal: AbortSignal.timeout(this.timeoutMs),
            });
            if (response.status === 503 && attempt < 3) { // busy: wait as it asks, then again
                const wait = Number(response.headers.get('retry-after') ?? 1);
                await sleep(Math.min(Math.max(Number.isFinite(wait) ? wait : 1, 0.05), 5) * 1000 * (attempt + 1));
                continue;
            }
            const data = await response.json().catch(() => ({}));
            if (!response.ok) throw new Error(`HTTP ${response.status}: ${data.error ?? response.statusText}`);
            return data;
        }
    }

    /**
     * `GET /v1/due`, page by page: the store's due URLs (originals and canonicals not fresh), the
     * start of a recrawl beside its seed, so that it reaches the pages behind pages skipped as fresh.
     */
    async due({ limit = 100000 } = {}) {
        const urls = [];
        let after = null;
        while (urls.length < limit) {
            const query = new URLSearchParams({ limit: String(Math.min(10000, limit - urls.length)) });
            if (after !== null) query.set('after', after);
            const page = await this.call('GET', `/v1/due?${query}`);
            urls.push(...page.urls);
            if (page.next === null) break;
            after = page.next;
        }
        return urls;
    }

    /** `GET /v1/should-fetch`; null where it failed (that URL is to be fetched). */
    async shouldFetch(url) {
        const query = new URLSearchParams({ url });
        if (this.maxAge !== undefined) query.set('max_age', String(this.maxAge));
        try {
            return await this.call('GET', `/v1/should-fetch?${query}`);
        } catch (error) {
            this.count('should_fetch_error');
            console.warn(`neardup: should-fetch failed for ${url}: ${error.message}`);
            return null;
        }
    }

    skipReason(decision) {
        if (!decision) return null;
        if (decision.fetch) {
            const fetched = decision.fetched_at;
            // the URL, as the store keys it (tracking parameters dropped...), was fetched during this
            // crawl already: Crawlee's request keys tell those spellings apart
            if (decision.reason === 'known' && fetched != null && fetched >= this.started) return 'this-crawl';
            return null;
        }
        return decision.reason;
    }

    /**
     * The requests to queue (URLs, or request options / Request objects): those the service does not skip,
     * plus, for a skip that names the copy to keep, that URL (once; asked about first), with the skipped
     * request's userData. URLs in, URLs out; a request with userData.neardup_ignore passes untouched.
     */
    async filterRequests(requests) {
        const urlOf = (r) => (typeof r === 'string' ? r : r.url);
        const asked = requests.filter((r) => typeof r === 'string' || !r.userData?.neardup_ignore);
        const decisions = new Map();
        (await mapLimit(asked, this.concurrency, (r) => this.shouldFetch(urlOf(r)))).forEach((d, i) => {
            decisions.set(asked[i], d);
        });
        const kept = [];
        const instead = new Map();
        for (const r of requests) {
            const decision = decisions.get(r);
            const reason = decisions.has(r) ? this.skipReason(decision) : null;
            if (reason === null) {
                kept.push(r);
                continue;
            }
            this.count('skipped_before_fetch');
            this.count(`skipped_before_fetch/${reason}`);
            const other = INSTEAD.has(reason) ? (decision.canonical_url ?? decision.known_url) : null;
            if (other && other !== urlOf(r) && other !== decision.key && !instead.has(other)) {
                instead.set(other, typeof r === 'string' ? other : { url: other, userData: { ...r.userData } });
            }
        }
        const known = new Set(kept.map(urlOf));
        const extra = [...instead.values()].filter((r) => !known.has(urlOf(r)));
        const again = await mapLimit(extra, this.concurrency, (r) => this.shouldFetch(urlOf(r)));
        extra.forEach((r, i) => {
            if (this.skipReason(again[i]) === null) {
                this.count('canonical_enqueued');
                kept.push(r);
            }
        });
        return kept;
    }

    /** `filterRequests` of URLs (start URLs): the URLs to queue. */
    async filterUrls(urls) {
        return this.filterRequests(urls);
    }

    /**
     * The requests `context.enqueueLinks(options)` would queue, found by Crawlee's own enqueueLinks (its
     * selector, strategy, globs, regexps, exclude, limit and transformRequestFunction applied) handing them
     * to a stand-in request queue (its documented `requestQueue` option) that keeps them instead.
     */
    static async wouldEnqueue(context, options) {
        const found = [];
        const collector = {
            async addRequestsBatched(requests, { maxNewRequests } = {}) {
                found.push(...requests.slice(0, maxNewRequests ?? requests.length));
                return { addedRequests: [], waitForAllRequestsToBeAdded: Promise.resolve([]) };
            },
        };
        await context.enqueueLinks({ ...options, requestQueue: collector });
        return found;
    }

    /**
     * `context.enqueueLinks(options)` with the service's decision before the queue; returns the requests
     * queued. The links of a duplicate page are not followed unless followDuplicates.
     */
    async enqueueLinks(context, options = {}) {
        const found = await Neardup.wouldEnqueue(context, options);
        if (isDroppedCopy(context.request.userData.neardup) && !this.followDuplicates) {
            this.count('links_not_followed', found.length);
            return [];
        }
        const decided = await this.filterRequests(found);
        const kept = decided.filter((r) => found.includes(r));
        const instead = decided.filter((r) => !found.includes(r));
        if (instead.length) { // the copies to keep, through the same filters (scope, strategy)
            const { selector, ...rest } = options;
            kept.push(...await Neardup.wouldEnqueue(context, { ...rest, urls: instead.map((r) => r.url) }));
        }
        if (kept.length) await context.addRequests(kept);
        return kept;
    }

    /** `POST /v1/pages` of the fetched page (HTML, status 200); its verdict, also in request.userData.neardup. */
    async add(context) {
        const { request, response, body } = context;
        const status = response?.statusCode ?? response?.status;
        const type = String(response?.headers?.['content-type'] ?? 'text/html');
        if (!type.toLowerCase().includes('html')) {
            this.count('not_html');
            return null;
        }
        if (status !== 200) {
            this.count('not_200');
            return null;
        }
        const url = request.loadedUrl ?? request.url;
        let verdict;
        try { // the body as Crawlee decoded it: the service takes text
            verdict = await this.call('POST', '/v1/pages', { url, html: String(body) });
        } catch (error) {
            this.count('error');
            console.warn(`neardup: page not added: ${url}: ${error.message}`);
            return null;
        }
        this.count(verdict.version ?? verdict.status);
        request.userData.neardup = verdict;
        return verdict;
    }

    /** A requestHandler that adds the page first: with onDuplicate 'drop' a duplicate (isDroppedCopy) never reaches `fn`. */
    handler(fn) {
        return async (context) => {
            const verdict = await this.add(context);
            if (isDroppedCopy(verdict)) {
                if (this.onDuplicate === 'drop') {
                    this.count('dropped');
                    return;
                }
                this.count('tagged');
            }
            await fn(context);
        };
    }
}
