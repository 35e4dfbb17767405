"""Write the bundled sample as the other inputs ``neardup dedup`` reads: a WARC and a JSONL file.

The pages of ``examples/sample`` (its ``urls.tsv`` gives each file's URL and capture date)
become ``response`` records of a gzipped WARC/1.1 file (``WARC-Date``: the capture date; one
gzip member per record, as crawlers write them) and ``{"url", "html", "fetched_at"}`` lines of
a JSONL file, in capture order. It uses FastWARC, which neardup installs.

    python examples/sample_inputs.py --warc crawl.warc.gz --jsonl more.jsonl
    python examples/sample_inputs.py --warc npr.warc.gz --only npr-dylann-roof
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import uuid
from datetime import UTC, datetime
from pathlib import Path

from fastwarc.warc import WarcRecord, WarcRecordType

SAMPLE = Path(__file__).resolve().parent / "sample"


def sample_pages(only: str = "") -> list[tuple[str, datetime, bytes]]:
    """(url, capture time, HTML bytes) of the sample's pages whose file name contains ``only``,
    in capture order."""
    with open(SAMPLE / "urls.tsv", encoding="utf-8", newline="") as fh:
        rows = [r for r in csv.DictReader(fh, delimiter="\t") if only in r["file"]]
    pages = [(r["url"], datetime.fromisoformat(r["captured"]).replace(tzinfo=UTC),
              gzip.decompress((SAMPLE / r["file"]).read_bytes())) for r in rows]
    return sorted(pages, key=lambda p: p[1])


def warc_record(url: str, when: datetime, html: bytes) -> bytes:
    """One gzip member holding one ``response`` record of an HTTP 200 answer with ``html``."""
    http = (b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
            + f"Content-Length: {len(html)}\r\n\r\n".encode()) + html
    record = WarcRecord()
    record.init_headers(WarcRecordType.response, uuid.uuid5(uuid.NAMESPACE_URL, f"{url} {when}").urn[4:].encode())
    record.headers["WARC-Target-URI"] = url
    record.headers["WARC-Date"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    record.headers["Content-Type"] = "application/http; msgtype=response"
    record.set_bytes_content(http)
    out = io.BytesIO()
    record.write(out, checksum_data=True)
    return gzip.compress(out.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--warc", type=Path, help="write the pages as a gzipped WARC file here")
    parser.add_argument("--jsonl", type=Path, help="write the pages as JSONL here")
    parser.add_argument("--only", default="", help="only the files whose name contains this")
    args = parser.parse_args()
    if not (args.warc or args.jsonl):
        parser.error("give --warc, --jsonl or both")
    pages = sample_pages(args.only)
    if not pages:
        parser.error(f"no sample file name contains {args.only!r}")
    if args.warc:
        with open(args.warc, "wb") as fh:
            for url, when, html in pages:
                fh.write(warc_record(url, when, html))
    if args.jsonl:
        with open(args.jsonl, "w", encoding="utf-8") as fh:
            for url, when, html in pages:
                fh.write(json.dumps({"url": url, "html": html.decode("utf-8", "replace"),
                                     "fetched_at": when.timestamp()}) + "\n")


if __name__ == "__main__":
    main()
