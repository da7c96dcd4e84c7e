"""Workers' own logs (`squall.cluster.logs`): Storm's place, lines tagged with the running
component and task, rotation by size, and reading them back for ``squall logs``."""

import logging
import logging.handlers
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from squall.cluster.logs import (
    TaskTagFilter, parse_worker_log, tail_records, worker_log_files, worker_log_handler, worker_log_link,
    worker_log_path,
)


def test_the_worker_log_is_at_storms_place_under_storm_log_dir_else_under_storm_local_dir(tmp_path):
    assert worker_log_path({"storm.local.dir": str(tmp_path)}, "wc-1-7", 6700) == \
        tmp_path / "logs" / "workers-artifacts" / "wc-1-7" / "6700" / "worker.log"
    conf = {"storm.local.dir": "x", "storm.log.dir": str(tmp_path / "l"), "storm.workers.artifacts.dir": "wa"}
    assert worker_log_path(conf, "t", 1) == tmp_path / "l" / "wa" / "t" / "1" / "worker.log"


def test_a_log_link_is_the_logviewers_link_on_the_ui_daemon_with_the_file_quoted():
    assert worker_log_link("wc-1-7", 6700) == "/api/v1/log?file=wc-1-7%2F6700%2Fworker.log"


def _log_from_thread(logger, thread_loop, message):
    """Log ``message`` from a thread that carries ``thread_loop`` as an executor loop's does."""
    def run():
        logger.info(message)
    t = threading.Thread(target=run)
    t.squall_loop = thread_loop
    t.start()
    t.join()


def test_every_line_names_the_component_and_task_whose_user_code_runs_and_the_system_otherwise(tmp_path):
    path = tmp_path / "w" / "worker.log"
    handler = worker_log_handler(path, {"squall.log.max.bytes": 0})
    logger = logging.getLogger("test.user.code")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        loop = SimpleNamespace(current=SimpleNamespace(component="split", current_task=7))
        _log_from_thread(logger, loop, "from the bolt")
        loop.current = None  # between calls into executors: the loop's own work
        _log_from_thread(logger, loop, "between calls")
        logger.info("from another thread")
    finally:
        logger.removeHandler(handler)
        handler.close()
    records = list(parse_worker_log(path.read_text().splitlines(keepends=True)))
    assert [(r.component, r.task) for r in records] == [("split", 7), ("__system", -1), ("__system", -1)]
    assert "[INFO] [split:7] from the bolt" in records[0].text
    assert path.stat().st_mode & 0o077 == 0


def test_the_filter_reads_the_current_executor_lazily_so_a_switch_is_seen_at_once():
    f = TaskTagFilter()
    loop = SimpleNamespace(current=SimpleNamespace(component="a", current_task=1))
    seen = []

    def run():
        for comp, task in (("a", 1), ("b", 2)):
            loop.current = SimpleNamespace(component=comp, current_task=task)
            rec = logging.LogRecord("x", logging.INFO, __file__, 1, "m", (), None)
            f.filter(rec)
            seen.append((rec.component, rec.task))
    t = threading.Thread(target=run)
    t.squall_loop = loop
    t.start()
    t.join()
    assert seen == [("a", 1), ("b", 2)]


def test_the_worker_log_rotates_at_the_configured_size_and_count_and_is_read_back_in_order(tmp_path):
    conf = {"storm.local.dir": str(tmp_path), "squall.log.max.bytes": 2000, "squall.log.backup.count": 2}
    path = worker_log_path(conf, "topo-1", 6701)
    handler = worker_log_handler(path, conf)
    logger = logging.getLogger("test.rotation")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        for i in range(200):
            logger.info("line %05d", i)
    finally:
        logger.removeHandler(handler)
        handler.close()
    names = sorted(p.name for p in path.parent.iterdir())
    assert names == ["worker.log", "worker.log.1", "worker.log.2"]
    assert all(p.stat().st_size <= 2000 for p in path.parent.iterdir())
    (files,) = worker_log_files(conf, "topo-1").values()
    assert [p.name for p in files] == ["worker.log.2", "worker.log.1", "worker.log"]  # oldest first
    last = tail_records(files, 3)
    assert [line[-10:] for line in last] == ["line 00197", "line 00198", "line 00199"]


def test_a_component_tail_keeps_a_records_continuation_lines_and_only_that_components_records(tmp_path):
    head = "2024-05-01 10:00:00.123 squall.user loop-1 [{}] [{}:{}] {}\n"
    lines = [head.format("INFO", "spout", 1, "emit"),
             head.format("ERROR", "split", 3, "bad tuple"),
             "Traceback (most recent call last):\n", "ValueError: x\n",
             head.format("INFO", "__system", -1, "heartbeat"),
             head.format("INFO", "split", 4, "ok")]
    f = tmp_path / "worker.log"
    f.write_text("".join(lines))
    assert tail_records([f], 10, "split") == [line.rstrip("\n") for line in lines[1:4] + lines[5:]]
    assert tail_records([f], 2, "split") == ["ValueError: x", lines[5].rstrip("\n")]
    assert tail_records([f], 10, "count") == []


def test_a_local_cluster_writes_worker_logs_only_when_storm_log_dir_is_set(tmp_path):
    from squall import LocalCluster, TopologyBuilder

    from ..conftest import wait_until
    from ..process.logging_topology import Counter, Reporter

    user = logging.getLogger("user.logging_topology")
    user.setLevel(logging.INFO)
    b = TopologyBuilder()
    b.set_spout("counter", Counter(5), 1)
    b.set_bolt("reporter", Reporter(), 1).shuffle_grouping("counter")
    try:
        with LocalCluster({"storm.log.dir": str(tmp_path / "logs")}) as cluster:
            cluster.submit_topology("talk", {}, b.create_topology())
            topo_id = cluster.get_topology_info("talk")["id"]
            conf = {"storm.log.dir": str(tmp_path / "logs")}

            def logged():
                return [line for paths in worker_log_files(conf, topo_id).values()
                        for line in paths[-1].read_text().splitlines() if "reporter saw 5" in line]
            assert wait_until(logged, 20)
            (line,) = logged()
            assert "[reporter:" in line
        with LocalCluster({"storm.local.dir": str(tmp_path / "local")}) as cluster:
            cluster.submit_topology("talk", {}, b.create_topology())
            assert wait_until(lambda: cluster.get_topology_info("talk")["components"]["reporter"]["executed"] >= 5, 20)
        assert not (tmp_path / "local" / "logs").exists()
    finally:
        user.setLevel(logging.NOTSET)
    assert not any(isinstance(h, logging.handlers.RotatingFileHandler) for h in logging.getLogger().handlers)


def test_an_unwritable_log_dir_sends_the_workers_logging_to_stderr_saying_why(tmp_path, capfd):
    blocker = tmp_path / "file"
    blocker.write_text("")  # a file where the log directory should be
    root = logging.getLogger()
    before = list(root.handlers), root.level
    try:
        from squall.cluster.logs import install_worker_logging
        install_worker_logging({"storm.log.dir": str(blocker)}, "t-1", "127.0.0.1:6700")
        logging.getLogger("test.unwritable").info("still logged")
    finally:
        for h in list(root.handlers):
            root.removeHandler(h)
        for h in before[0]:
            root.addHandler(h)
        root.setLevel(before[1])
        from squall.cluster import logs
        logs._GUARDED.clear()  # squall's loggers back to plain ones for the tests after this
    err = capfd.readouterr().err
    assert "cannot write its log" in err and "storm.log.dir" in err and "still logged" in err


_RECONFIGURE = {
    "dictConfig": "logging.config.dictConfig({'version': 1})",
    "dictConfig-root": "logging.config.dictConfig({'version': 1, 'handlers': {'h': {'class': 'logging.NullHandler'}},"
                       " 'root': {'handlers': ['h'], 'level': 'CRITICAL'}})",
    "fileConfig": "logging.config.fileConfig(io.StringIO('[loggers]\\nkeys=root\\n[handlers]\\nkeys=\\n"
                  "[formatters]\\nkeys=\\n[logger_root]\\nlevel=CRITICAL\\nhandlers=\\n'))",
    "disable": "logging.disable(logging.CRITICAL)",
    "root-critical": "logging.getLogger().setLevel(logging.CRITICAL)",
    "basicConfig-force": "logging.basicConfig(force=True, level=logging.ERROR, stream=io.StringIO())",
}


@pytest.mark.parametrize("how", sorted(_RECONFIGURE))
def test_squalls_own_warnings_reach_the_worker_log_whatever_user_code_does_to_logging(tmp_path, how):
    """Storm's worker log is the cluster's: a topology that configures `logging` its own way
    (dictConfig's disable_existing_loggers, true by default, disables every logger made before
    it, squall's too) must not silence the worker's reports of a raised execute, a crash, a
    stuck executor or a master out of reach. A worker process of its own, as on the process host."""
    script = f"""
import io, logging, logging.config, sys
from squall.cluster.logs import install_worker_logging
import squall.engine.bolt_executor  # makes the logger squall.engine before the configuration
path = install_worker_logging({{"storm.log.dir": {str(tmp_path)!r}}}, "t-1", "127.0.0.1:6700")
{_RECONFIGURE[how]}
for i in range(3):
    logging.getLogger("squall.engine").error("execute raised %d", i)
    logging.getLogger("squall.worker.made_later").warning("master out of reach %d", i)
logging.getLogger("squall.engine").info("an info line follows the configuration")
logging.getLogger("user.code").critical("the user's own line")
print(path)
"""
    out = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    text = Path(out.stdout.strip()).read_text()
    for i in range(3):
        assert text.count(f"[ERROR] [__system:-1] execute raised {i}\n") == 1, text
        assert text.count(f"[WARNING] [__system:-1] master out of reach {i}\n") == 1, text
    # below WARNING squall's lines follow the user's levels (dictConfig alone changed none)
    assert ("an info line" in text) == (how == "dictConfig"), text
    assert out.stderr.count("execute raised") == 3 and "master out of reach" not in out.stderr  # errors to stderr too
    assert "Logging error" not in out.stderr


def test_a_level_set_by_set_log_level_still_holds_squalls_loggers_back(tmp_path):
    script = f"""
import logging
from squall._nimbus import LogConfig, LogLevel
from squall.cluster.logs import install_worker_logging
from squall.worker.log_levels import LogLevelManager
path = install_worker_logging({{"storm.log.dir": {str(tmp_path)!r}}}, "t-1", "127.0.0.1:6700")
manager = LogLevelManager()
manager.apply(LogConfig({{"squall.engine": LogLevel("UPDATE", "OFF", 0, None)}}), 0.0)
logging.getLogger("squall.engine.bolt_executor").error("held back")
manager.close()
logging.getLogger("squall.engine.bolt_executor").error("let through")
print(path)
"""
    out = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    text = Path(out.stdout.strip()).read_text()
    assert "held back" not in text and text.count("let through") == 1, text


def test_a_line_utf8_cannot_encode_is_kept_escaped_not_lost_with_a_logging_error(tmp_path, capfd):
    """A str with lone surrogates (bytes decoded with surrogateescape: a file name, an
    environment value) was dropped with a "--- Logging error ---" traceback on stderr."""
    path = tmp_path / "w" / "worker.log"
    handler = worker_log_handler(path, {"squall.log.max.bytes": 0})
    logger = logging.getLogger("test.user.junk")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        for i in range(5):
            logger.info("file %d %s", i, b"name-\xff\xfe".decode("utf-8", "surrogateescape"))
    finally:
        logger.removeHandler(handler)
        handler.close()
    records = list(parse_worker_log(path.read_text(encoding="utf-8").splitlines(keepends=True)))
    assert [r.text.split("] ", 2)[2] for r in records] == [f"file {i} name-\\udcff\\udcfe\n" for i in range(5)]
    assert "Logging error" not in capfd.readouterr().err
