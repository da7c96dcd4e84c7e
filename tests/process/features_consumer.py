"""A metrics consumer for tests/process/test_features_on_workers.py: named by the topology's
``topology.metrics.consumer.register`` (so a worker imports it by name), it writes each data
point it gets to ``points.jsonl`` under ``test.out.dir``."""

import json
from pathlib import Path

from squall import IMetricsConsumer


class DataPointsToFile(IMetricsConsumer):
    """Appends ``{"component", "name", "value"}`` per data point, one JSON line each."""

    def prepare(self, conf, registration_argument, context, error_reporter):
        self.path = Path(conf["test.out.dir"]) / "points.jsonl"

    def handle_data_points(self, task_info, data_points):
        with open(self.path, "a") as f:
            f.writelines(json.dumps({"component": task_info.src_component_id, "name": point.name,
                                    "value": point.value}) + "\n" for point in data_points)
