"""The online Detector: decide each page against the stored ones, keep clusters, versions and canonicals.
(The wing's face: its public names, defined in its modules.)"""

from neardup.detector.core import Detector
from neardup.detector.expiry import EXPIRE_BATCH
from neardup.model import (
    DEFAULT_K,
    DEFAULT_K_BY_VERSION,
    DEFAULT_THRESHOLD,
    DEFAULT_TRAP_MEMBERS,
    DEFAULT_VERIFY,
    METHODS,
    MIN_BUDGET_FACTOR,
    STATUSES,
    FetchDecision,
    Page,
    Verdict,
)

__all__ = [
    "DEFAULT_K",
    "DEFAULT_K_BY_VERSION",
    "DEFAULT_THRESHOLD",
    "DEFAULT_TRAP_MEMBERS",
    "DEFAULT_VERIFY",
    "Detector",
    "EXPIRE_BATCH",
    "FetchDecision",
    "METHODS",
    "MIN_BUDGET_FACTOR",
    "Page",
    "STATUSES",
    "Verdict",
]
