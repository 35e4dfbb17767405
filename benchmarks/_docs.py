"""The docs helpers under their former module name, for the scripts that still import them from
here (index.py, spark.py); they live in :mod:`_common`."""

from __future__ import annotations

from _common import replace_section, table

__all__ = ["replace_section", "table"]
