"""The file to hand ``spark-submit``: ``squall jar --host spark`` in a driver that spark-submit
configured (master, deploy mode, executors, ``--py-files``, ``--archives``)::

    spark-submit --master spark://HOST:7077 "$(python -c 'import squall.cli.spark_submit as m; print(m.__file__)')" \\
        [squall jar options] FILE [ARGS...]

The master runs in this driver until the topology is killed (``squall kill NAME``) or the
driver is stopped; see docs/spark.md.
"""

import sys

from squall.cli import main

if __name__ == "__main__":
    sys.exit(main(["jar", "--host", "spark", *sys.argv[1:]]))
