"""What a crawler trap's copies cost to add (issue 38, item 2): near copies of one page that
share every sketch band, added one at a time to one Detector, against distinct pages added to
another (the control), CPU per add measured at the store sizes a trap reaches.

A trap serves one page under ever new URLs with a token that changes (a session id, a counter
in the text): each copy has its own digest, the same shingles but one, so every copy is a near
duplicate of the first, in its cluster, sharing all of its sketch bands with every other copy.
The bands then hold a bucket that grows with the trap: the add must not read it whole.

    python benchmarks/trap_cost.py --copies 100000
    python benchmarks/trap_cost.py --copies 100000 --write docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from _common import machine_line, replace_section, table

from neardup import Detector

START, END = "<!-- trap_cost:start -->", "<!-- trap_cost:end -->"
WORDS = [f"w{i}" for i in range(20_000)]


def trap_page(base: str, i: int) -> str:
    return f"<html><head><title>Events</title></head><body><article><p>{base} visit {i}</p></article></body></html>"


def distinct_page(rng: random.Random, i: int) -> str:
    text = " ".join(rng.choice(WORDS) for _ in range(400))
    return f"<html><head><title>Page {i}</title></head><body><article><p>{text}</p></article></body></html>"


def measure(n: int, marks: list[int], make: Callable[[int], str]) -> dict[int, float]:
    """CPU microseconds per add (median of the 50 adds ending at each mark)."""
    det = Detector()
    per: list[float] = []
    out: dict[int, float] = {}
    for i in range(n):
        url = f"https://trap.example/events?visit={i}"
        fp = det.fingerprint(make(i), url)  # the page's own cost apart
        c0 = time.process_time()
        det.add_fingerprint(url, fp, fetched_at=1.7e9 + i)
        per.append(time.process_time() - c0)
        if i + 1 in marks:
            out[i + 1] = statistics.median(per[-50:]) * 1e6
    det.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=100_000)
    ap.add_argument("--write", type=Path)
    args = ap.parse_args()
    marks = sorted({m for m in (100, 1_000, 10_000, 30_000, 100_000, args.copies) if m <= args.copies})
    rng = random.Random(7)
    base = " ".join(rng.choice(WORDS) for _ in range(400))
    trap = measure(args.copies, marks, lambda i: trap_page(base, i))
    rng2 = random.Random(8)
    control = measure(args.copies, marks, lambda i: distinct_page(rng2, i))
    rows = [[f"{m:,}", f"{trap[m]:,.0f}", f"{control[m]:,.0f}", f"{trap[m] / control[m]:.2f}"] for m in marks]
    lines = [START, "", "## A trap's copies stay cheap (`benchmarks/trap_cost.py`)", "",
             f"Machine: {machine_line()}. Command: `python benchmarks/trap_cost.py --copies {args.copies}`. "
             "One Detector in memory; each copy the same 400-word page with one token changed (its own digest, "
             "a near duplicate of the first, sharing every sketch band); the control adds distinct pages. CPU per "
             "`add_fingerprint` (fingerprinting apart), median of the 50 adds ending at each count.", "",
             *table(["pages stored", "trap copy (µs)", "distinct page (µs)", "ratio"], rows), "",
             f"The {marks[-1]:,}th copy costs {trap[marks[-1]] / trap[marks[0]]:.2f}x the {marks[0]}th.", "", END]
    text = "\n".join(lines)
    print(text)
    if args.write:
        replace_section(args.write, START, END, text)


if __name__ == "__main__":
    main()
