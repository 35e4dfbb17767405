"""``python -m neardup.batch.spark`` (and the file ``spark-submit`` runs): the batch job on Spark.
Executors unpickle the job's functions by their module name (:mod:`neardup.batch.spark.job`),
never ``__main__``: this file only calls :func:`neardup.batch.spark.submit.main`."""

import sys

from neardup.batch.spark.submit import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
