"""The batch job on Apache Spark (``pip install 'neardup[spark]'``): the same answer past one machine.
(The wing's face: its public names, defined in its modules.)"""

from neardup.batch.spark.job import dedup, fingerprints, session
from neardup.batch.spark.submit import run

__all__ = ['dedup', 'fingerprints', 'run', 'session']
