"""Inputs (files, folders, WARC, JSONL, URL lists) and the worker processes that fingerprint them.
(The wing's face: its public names, defined in its modules.)"""

from neardup.ingest.inputs import read_input
from neardup.ingest.items import InputItem

__all__ = ["InputItem", "read_input"]
