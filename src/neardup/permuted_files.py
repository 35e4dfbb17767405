"""The permuted-table index on disk: ``.npy`` levels (memory-mapped at open), the delta, the
removed entries and ``manifest.json`` (format :data:`~neardup.permuted.FORMAT_VERSION`,
the layout, the store token). :meth:`PermutedIndex.save` and :meth:`PermutedIndex.open`
call these.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from neardup.errors import NeardupError, StoreError
from neardup.index import save_npy, write_manifest
from neardup.permuted import FORMAT_VERSION, READABLE_FORMATS, Layout, _Level

if TYPE_CHECKING:
    from neardup.permuted import PermutedIndex


def save_index(idx: PermutedIndex, root: Path, token: str | None) -> None:
    """Write ``idx`` under ``root`` (levels already there are kept)."""
    root.mkdir(parents=True, exist_ok=True)
    names = []
    for lv in idx._levels:
        names.append(lv.name)
        for part in ("tables", "dirs", "ids"):
            if not (root / f"{lv.name}.{part}.npy").exists():
                save_npy(root, f"{lv.name}.{part}", getattr(lv, part))
    pairs = sorted(idx._dead)
    dead = np.zeros((len(pairs), 2), dtype=np.int64)
    if pairs:
        dead[:, 0] = np.array([i for i, _ in pairs], dtype=np.int64)
        dead[:, 1] = np.array([v for _, v in pairs], dtype=np.uint64).view(np.int64)
    save_npy(root, "delta", np.stack([idx._delta_ids, idx._delta_vals.view(np.int64)]))
    save_npy(root, "dead", dead)
    write_manifest(root, {"format": FORMAT_VERSION, "layout": idx.layout.to_dict(), "levels": names,
                          "d": [lv.d for lv in idx._levels], "token": token, "delta_limit": idx.delta_limit,
                          "merge_ratio": idx.merge_ratio})
    for f in root.glob("*.npy"):
        stem = f.name.split(".")[0]
        if stem not in names and stem not in ("delta", "dead"):
            f.unlink()
    idx.path = root


def open_index(cls: type[PermutedIndex], root: Path, mmap: bool) -> PermutedIndex:
    """The index saved under ``root``; a missing or damaged one is a :class:`StoreError`."""
    try:
        manifest = json.loads((root / "manifest.json").read_text())
        if not isinstance(manifest, dict):
            raise ValueError("manifest is not a JSON object")
        if manifest.get("format") not in READABLE_FORMATS:
            raise StoreError(f"index {root} has format {manifest.get('format')}, expected {FORMAT_VERSION}")
        layout = Layout.from_dict(manifest["layout"])
        idx = cls(k=layout.k, layout=layout, delta_limit=manifest["delta_limit"],
                  merge_ratio=manifest["merge_ratio"])
        mode: Literal["r"] | None = "r" if mmap else None
        for name, d in zip(manifest["levels"], manifest["d"]):
            idx._levels.append(_Level(np.load(root / f"{name}.tables.npy", mmap_mode=mode),
                                      np.load(root / f"{name}.dirs.npy", mmap_mode=mode),
                                      np.load(root / f"{name}.ids.npy", mmap_mode=mode), int(d), name))
        delta = np.load(root / "delta.npy")
        idx._delta_ids = delta[0].astype(np.int64)
        idx._delta_vals = delta[1].view(np.uint64).copy()
        dead = np.load(root / "dead.npy")
        idx._dead = {(int(i), int(v)) for i, v in zip(dead[:, 0], dead[:, 1].view(np.uint64))}
        idx._dead_ids = {i for i, _ in idx._dead}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, NeardupError) as exc:
        raise StoreError(f"index {root} is missing or damaged ({exc})") from None
    idx.token = manifest.get("token")
    idx.path = root
    return idx
