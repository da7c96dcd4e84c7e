"""A Flux file whose className names a streamparse (pystorm) Spout or Bolt, the classes a
streamparse project already has: they run in process, as `squall sparse run` runs them, where
Storm's Flux needed a FluxShellBolt running ``streamparse_run module.Class``.

Before, squall made the class as any className (which wraps the process's stdout, and closes
it once the object is collected) and refused it (``set_spout needs a Spout, got EventSpout``);
``squall local FILE`` then ended with ``ValueError: I/O operation on closed file``."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from squall import Fields, flux
from squall.flux import FluxError

from ..conftest import wait_until

pytest.importorskip("streamparse", reason="the streamparse extra (pip install squall[streamparse])")

N = 300
USERS = ["Alice", "BOB", "carol"]

COMPONENTS = textwrap.dedent('''
    """A streamparse project's components: a reliable spout of N records, a parse bolt, a bolt
    that fails the first delivery of every 50th record (so the spout replays it) and records
    each delivery in SEEN, keyed by the record's number."""
    from collections import Counter

    from streamparse import Bolt, Spout, Stream

    SEEN = Counter()
    ACKED = set()
    FAILED_ONCE = set()


    class EventSpout(Spout):
        outputs = ["seq", "line"]

        def initialize(self, conf, ctx):
            self.todo = list(range(conf["test.records"]))
            self.users = conf["test.users"]

        def next_tuple(self):
            if self.todo:
                seq = self.todo.pop(0)
                self.emit([seq, f"user={self.users[seq % len(self.users)]} seq={seq}"], tup_id=seq)

        def ack(self, tup_id):
            ACKED.add(tup_id)

        def fail(self, tup_id):
            self.todo.append(tup_id)


    class ParseBolt(Bolt):
        outputs = [Stream(["seq", "user"], "parsed")]

        def process(self, tup):
            seq, line = tup.values
            kv = dict(part.split("=", 1) for part in line.split())
            self.emit([seq, kv["user"].lower()], stream="parsed")


    class CountBolt(Bolt):
        auto_ack = False

        def process(self, tup):
            seq, user = tup.values
            if seq % 50 == 0 and seq not in FAILED_ONCE:
                FAILED_ONCE.add(seq)
                self.fail(tup)
                return
            SEEN[(seq, user)] += 1
            self.ack(tup)
''')

FLUX = textwrap.dedent('''
    name: "sparse-classes"
    config:
      topology.max.spout.pending: 50
      test.records: {n}
      test.users: {users}
    spouts:
      - id: "events"
        className: "{module}.EventSpout"
    bolts:
      - id: "parse"
        className: "{module}.ParseBolt"
        parallelism: 2
      - id: "count"
        className: "{module}.CountBolt"
        parallelism: 2
    streams:
      - from: "events"
        to: "parse"
        grouping: {{type: SHUFFLE}}
      - from: "parse"
        to: "count"
        grouping: {{type: FIELDS, args: ["user"], streamId: "parsed"}}
''')


@pytest.fixture
def project(tmp_path, request):
    """A directory holding the components' module (named for the test, so that no two tests
    share its counters) and a Flux file naming its classes; the module importable from it."""
    module = f"sparse_flux_{request.node.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(COMPONENTS)
    (tmp_path / "events.yaml").write_text(FLUX.format(n=N, users=USERS, module=module))
    sys.path.insert(0, str(tmp_path))
    try:
        yield tmp_path, module
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(module, None)


def test_a_flux_file_naming_streamparse_classes_runs_them_in_process_counting_every_record(cluster, project):
    directory, module = project
    loaded = flux.load(directory / "events.yaml")
    assert loaded.topology.components["parse"].streams["parsed"].fields == Fields(["seq", "user"])
    components = sys.modules[module]

    cluster.submit_topology(loaded.name, loaded.conf, loaded.topology)
    try:
        assert wait_until(lambda: len(components.ACKED) == N, 30), f"acked {len(components.ACKED)} of {N}"
    finally:
        cluster.kill_topology(loaded.name, wait_secs=0)

    expected = {(seq, USERS[seq % len(USERS)].lower()) for seq in range(N)}
    assert set(components.SEEN) == expected  # every record counted, parsed by the streamparse bolt
    assert components.FAILED_ONCE == set(range(0, N, 50))  # failed once each, replayed by the spout's fail()
    assert sum(components.SEEN.values()) == N  # and counted once: nothing else failed or replayed


def test_a_streamparse_class_in_the_wrong_section_or_given_arguments_is_refused_naming_it(project):
    directory, module = project
    text = (directory / "events.yaml").read_text()

    (directory / "wrong.yaml").write_text(text.replace(f'className: "{module}.EventSpout"',
                                                       f'className: "{module}.ParseBolt"'))
    with pytest.raises(FluxError) as wrong:
        flux.load(directory / "wrong.yaml")
    assert str(wrong.value) == (f"wrong.yaml:9: spouts[0].className: 'events': {module}.ParseBolt is a "
                                f"streamparse Bolt, listed under spouts")

    (directory / "args.yaml").write_text(text.replace(f'className: "{module}.CountBolt"',
                                                      f'className: "{module}.CountBolt"\n    constructorArgs: [1]'))
    with pytest.raises(FluxError) as args:
        flux.load(directory / "args.yaml")
    assert "'count': " in str(args.value) and f"{module}.CountBolt is a streamparse Bolt" in str(args.value)
    assert "remove constructorArgs and set it up in its initialize(conf, context)" in str(args.value)


def test_squall_local_dry_run_of_such_a_file_prints_it_and_keeps_its_stdout(project):
    directory, _ = project
    done = subprocess.run([sys.executable, "-m", "squall", "local", "events.yaml", "--dry-run"], cwd=directory,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "closed file" not in done.stderr
    assert "parse [parsed] --FIELDS(user)--> count" in done.stdout


SRC_COMPONENTS = textwrap.dedent('''
    """A streamparse project's src/ module: its bolt imports a helper of src/ only in initialize(),
    as streamparse_run finds it in the jar's resources/."""
    from streamparse import Bolt, Spout

    DONE = []


    class Numbers(Spout):
        outputs = ["n"]

        def initialize(self, conf, ctx):
            self.todo = list(range(conf["test.records"]))

        def next_tuple(self):
            if self.todo:
                n = self.todo.pop(0)
                self.emit([n], tup_id=n)

        def ack(self, tup_id):
            DONE.append(tup_id)


    class Tally(Bolt):
        def initialize(self, conf, ctx):
            import {helpers}  # found in src/, in the worker
            self.record = {helpers}.record

        def process(self, tup):
            self.record(tup.values[0])
''')

SRC_HELPERS = textwrap.dedent('''
    SEEN = []


    def record(n):
        SEEN.append(n)
''')

SRC_FLUX = textwrap.dedent('''
    name: "from-src"
    config:
      test.records: {n}
    spouts:
      - id: "numbers"
        className: "{module}.Numbers"
    bolts:
      - id: "tally"
        className: "{module}.Tally"
        parallelism: 2
    streams:
      - {{from: "numbers", to: "tally", grouping: {{type: SHUFFLE}}}}
''')


def test_a_streamparse_projects_src_beside_the_flux_file_is_found_and_shipped_to_the_workers(cluster, tmp_path,
                                                                                            request):
    """docs/flux.md: a className names a class "of your project (its src/ beside the Flux file, or
    on the path)", as its example's src/redis_spout.py. src/ was not looked in: "'numbers':
    unknown class 'bolts.Numbers': no module 'bolts' on sys.path", from ``squall local`` as
    from ``flux.load``. It is now, and it goes with the streamparse classes that come from it, so
    that a module one imports in initialize() is found where its tasks run."""
    stem = f"src_flux_{request.node.name.replace('-', '_')}"
    module, helpers = f"{stem}_bolts", f"{stem}_helpers"
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / f"{module}.py").write_text(SRC_COMPONENTS.replace("{helpers}", helpers))
    (tmp_path / "src" / f"{helpers}.py").write_text(SRC_HELPERS)
    (tmp_path / "topology.yaml").write_text(SRC_FLUX.format(n=N, module=module))
    try:
        done = subprocess.run([sys.executable, "-m", "squall", "local", str(tmp_path / "topology.yaml"), "--dry-run"],
                              cwd=tmp_path.parent, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        assert "numbers --SHUFFLE--> tally" in done.stdout

        loaded = flux.load(tmp_path / "topology.yaml")
        assert str(tmp_path / "src") not in sys.path  # only while the file was built
        components = sys.modules[module]
        cluster.submit_topology(loaded.name, loaded.conf, loaded.topology)
        try:
            assert wait_until(lambda: len(components.DONE) == N, 30), f"acked {len(components.DONE)} of {N}"
        finally:
            cluster.kill_topology(loaded.name, wait_secs=0)
        assert sorted(sys.modules[helpers].SEEN) == list(range(N))  # every record counted, once
    finally:
        sys.modules.pop(module, None)
        sys.modules.pop(helpers, None)
