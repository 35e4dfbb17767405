"""The store the report tests draw: the bundled sample in capture order (recaptures of one URL
years apart: content drift) and up to 40 real corpus pages (dragnet) fetched 20 days apart."""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import os
from pathlib import Path

from neardup import Detector

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "sample"
DRAGNET = Path(os.environ.get("NEARDUP_CORPUS", ROOT.parent / "shared" / "corpus")) / "dragnet"


def build_report_store(path: Path) -> Path:
    """Write the store at ``path`` and return it."""
    det = Detector.open(path)
    rows = sorted(csv.DictReader((SAMPLE / "urls.tsv").open(encoding="utf-8"), delimiter="\t"),
                  key=lambda r: (r["captured"], r["file"]))
    for r in rows:
        when = dt.datetime.fromisoformat(r["captured"]).replace(tzinfo=dt.UTC).timestamp()
        det.add(r["url"], gzip.decompress((SAMPLE / r["file"]).read_bytes()), fetched_at=when)
    if (DRAGNET / "manifest.tsv").is_file():
        manifest = [r for r in csv.DictReader((DRAGNET / "manifest.tsv").open(encoding="utf-8"), delimiter="\t")
                    if r["url_from_html"].startswith("http")][:40]
        for i, r in enumerate(manifest):
            det.add(r["url_from_html"], gzip.decompress((DRAGNET / r["file"]).read_bytes()),
                    fetched_at=1600000000 + i * 20 * 86400)
    det.close()
    return path
