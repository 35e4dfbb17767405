// Crawl a site with Crawlee's CheerioCrawler and neardup's HTTP service (neardup.mjs).
//
//   neardup serve --db crawl.db --port 8080 &
//   python ../crawlee-python/noisy_site.py --port 8000 &
//   node crawl.mjs http://127.0.0.1:8000/ --service http://127.0.0.1:8080 --out pages.jsonl --stats-out stats.json
//
// Only the links under /pages/ and /copies/ of the start URL's site are followed (the noisy
// site's articles) unless --follow names another regular expression. Prints (and with
// --stats-out, writes) Crawlee's final statistics beside neardup's counts.
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import { CheerioCrawler, Configuration, log } from 'crawlee';

import { Neardup } from './neardup.mjs';

const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
        service: { type: 'string', default: process.env.NEARDUP_URL ?? 'http://127.0.0.1:8080' },
        token: { type: 'string', default: process.env.NEARDUP_TOKEN },
        'on-duplicate': { type: 'string', default: 'drop' },
        follow: { type: 'string' },
        concurrency: { type: 'string', default: '4' },
        out: { type: 'string' },
        'stats-out': { type: 'string' },
    },
});
const start = positionals[0];
if (!start) {
    console.error('usage: node crawl.mjs START_URL [--service URL] [--token T] [--on-duplicate drop|tag] '
        + '[--follow REGEXP] [--out FILE] [--stats-out FILE]');
    process.exit(2);
}
const site = new URL('/', start).href;
const escape = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const follow = new RegExp(values.follow ?? `^${escape(site)}(?:pages|copies)/`);

log.setLevel(log.LEVELS.WARNING);
const nd = new Neardup(values.service, { token: values.token, onDuplicate: values['on-duplicate'] });
const concurrency = Number(values.concurrency);
const crawler = new CheerioCrawler({
    maxConcurrency: concurrency,
    maxRequestRetries: 1,
    requestHandler: nd.handler(async (context) => { // adds the page first; a dropped duplicate never gets here
        const { request, $ } = context;
        const verdict = request.userData.neardup ?? {};
        await context.pushData({
            url: request.url,
            title: $('title').first().text(),
            status: verdict.status ?? null,
            version: verdict.version ?? null,
            canonical_url: verdict.canonical_url ?? null,
        });
        await nd.enqueueLinks(context, { regexps: [follow] }); // should-fetch before the queue
    }),
}, new Configuration({ persistStorage: false })); // a fresh queue and dataset each run; neardup keeps the memory

// the start URL and the store's due URLs (a recrawl reaches the pages behind fresh ones)
const final = await crawler.run(await nd.filterUrls([start, ...await nd.due()]));
const { items } = await crawler.getData();
if (values.out) writeFileSync(values.out, items.map((item) => `${JSON.stringify(item)}\n`).join(''));
const stats = { crawlee: final, neardup: nd.stats };
console.log(JSON.stringify(stats, null, 2));
if (values['stats-out']) writeFileSync(values['stats-out'], JSON.stringify(stats, null, 2));
