"""A fork server for the Python processes a local Spark driver starts (Trident on Spark's engine).

Why: a query's start is a chain of Python processes the driver JVM starts one after another,
each paying an interpreter's start and imports of pyspark (and, to unpickle the source, squall)
before the next can begin: the Data Source's lookup, its creation, the streaming source's
runner, the workers' daemon, the read planning. In ``bench.w1t_spark`` (cold JVM) they were most
of the 12-20 s before the first batch. This server imports all of that once, while the JVM
starts (`launcher.use_installed_pyspark` starts it before the SparkSession), and forks a process
per request instead: the launcher script (Spark's ``PYSPARK_PYTHON``) asks it to run
``-m MODULE ARGS`` and becomes a proxy for the forked process, which Spark then talks to as it
would to the one it started.

The protocol, on a Unix socket in the launcher's private directory: the launcher sends its stdin,
stdout and stderr (``SCM_RIGHTS``) with a JSON request (``argv``, ``env``, ``cwd``); the server
answers ``REFUSED`` (the launcher then execs the interpreter as before) or the child's pid, and,
when the child ends, its wait status. The launcher forwards the signals Spark sends it (Spark
stops its daemons with SIGTERM) and exits as the child did; the child ends itself when the
launcher's end of the socket closes (a launcher killed by SIGKILL).

A forked child is what a fresh ``python -m MODULE`` would be only where the server's imports
would be the same: the server refuses a request whose ``PYTHONPATH`` (pyspark's own zips off,
as `daemon.installed_first`) differs from its own, or whose environment differs in a variable
read when the interpreter starts or modules are imported (`_IMPORT_TIME`: ``PYTHON*``,
``SQUALL_*``, locale, pyspark's import-time switches). The hash seed is one of those:
the server runs with the ``PYTHONHASHSEED`` pyspark gives its Python processes (``0`` unless
set), so the children hash strings as a process Spark started would.
"""

from __future__ import annotations

import array
import json
import os
import signal
import socket
import struct
import sys
import threading
from collections.abc import Mapping

_HEADER = struct.Struct("!I")
_REPLY = struct.Struct("!q")
_CRED = struct.Struct("3i")  # SO_PEERCRED's struct ucred: pid, uid, gid
_MOST_BYTES = 1 << 20  # a request's JSON (argv, the environment, a directory) is a few kB
REFUSED = -1
"""The pid field of a refusal: the launcher runs the interpreter itself."""

# pyspark's modules that read the environment when imported (checked in pyspark 4.3)
_PYSPARK_IMPORT_TIME = frozenset({"SPARK_TESTING", "PYSPARK_ENABLE_NAMEDTUPLE_PATCH"})


# compared apart: PYTHONPATH as a path; PYTHONUNBUFFERED (Spark sets it for its workers) the child applies
_APART = frozenset({"PYTHONPATH", "PYTHONUNBUFFERED"})  # the path: by where its modules come from


def _import_time(key: str) -> bool:
    """Whether variable ``key`` can change what the interpreter's start or an import does: the
    interpreter's own (``PYTHONHASHSEED``, ``PYTHONWARNINGS``...: no underscore, unlike Spark's
    ``PYTHON_WORKER_FACTORY_PORT`` and the like), squall's, the locale's, pyspark's listed ones."""
    own = key.startswith("PYTHON") and "_" not in key and key not in _APART
    return own or key.startswith(("SQUALL_", "LC_")) or key == "LANG" or key in _PYSPARK_IMPORT_TIME


def child_path(env: Mapping[str, str], cwd: str, base: list[str]) -> list[str]:
    """``sys.path`` of a fresh ``python -m MODULE`` in ``cwd`` with ``env``: the directory, then
    ``PYTHONPATH`` (absolute, an empty entry the directory) and ``base`` (the interpreter's own
    path, as a fresh interpreter without ``PYTHONPATH`` reports it), each once, as ``site``
    leaves them."""
    from .daemon import without_own_zips

    pythonpath = without_own_zips(env["PYTHONPATH"], sys.path) if env.get("PYTHONPATH") else ""
    entries = [os.path.abspath(os.path.join(cwd, e)) for e in pythonpath.split(os.pathsep)] if pythonpath else []
    return [cwd, *dict.fromkeys([*entries, *base])]


def where_from(names: list[str], path: list[str]) -> dict[str, object]:
    """Where each top-level module of ``names`` would be imported from with ``path``: its file,
    a namespace package's directories, None when not found there."""
    from importlib.machinery import PathFinder

    out: dict[str, object] = {}
    for name in names:
        spec = PathFinder.find_spec(name, path)
        out[name] = None if spec is None else (spec.origin if spec.has_location else
                                               tuple(spec.submodule_search_locations or ()))
    return out


def refusal(env: Mapping[str, str], own_env: Mapping[str, str], path: list[str],
            loaded: Mapping[str, object]) -> str | None:
    """Why a child with environment ``env`` and ``sys.path`` ``path`` would not be the process a
    fresh interpreter would be, in a server started with ``own_env`` that has imported the
    top-level modules ``loaded`` (name -> `where_from`); None when it would."""
    for key in sorted({*env, *own_env}):
        if _import_time(key) and env.get(key) != own_env.get(key):
            return f"{key} differs from the server's"  # not the values: a variable may hold a secret
    theirs = where_from(list(loaded), path)
    for name, where in loaded.items():
        if theirs[name] != where:
            return f"its path imports {name} from {theirs[name]!r}, the server did from {where!r}"
    return None


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise EOFError("the other end closed")
        data += chunk
    return data


# -- the launcher's side ------------------------------------------------------------------------

def run(path: str, argv: list[str], timeout: float = 60.0) -> int | None:
    """Run ``python argv`` (``-m MODULE ...``) as a fork of the server at ``path`` with this
    process's stdio, environment and directory; return its exit code (a signal ``N`` as
    ``128 + N`` after this process re-raised it on itself), or None when the server is not
    there or refused (then nothing ran)."""
    # pyspark starts its JVM with SIGINT ignored, and so every process the JVM starts, this
    # launcher included: the fork keeps it ignored as a process started by the JVM would, and
    # Ctrl-C at the driver's terminal (SIGINT to its whole process group) stops the driver alone
    # instead of failing the query's Python processes under it with KeyboardInterrupt
    sigint_ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(timeout)
        conn.connect(path)
        body = json.dumps({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd(),
                           "sigint_ignored": sigint_ignored}).encode()
        conn.sendmsg([_HEADER.pack(len(body)) + body],
                     [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
        (pid,) = _REPLY.unpack(_recv_exact(conn, _REPLY.size))
    except OSError:
        conn.close()
        return None
    if pid == REFUSED:
        conn.close()
        return None
    conn.settimeout(None)
    # the child has our stdio: ours closed, so a reader of our stdout sees its end when the child's
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)

    def forward(signum: int, frame: object) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        if not (sig == signal.SIGINT and sigint_ignored):
            signal.signal(sig, forward)
    try:
        (status,) = _REPLY.unpack(_recv_exact(conn, _REPLY.size))
    except (OSError, EOFError):
        return 1  # the server died before the child: its status is lost
    if os.WIFSIGNALED(status):
        killed = os.WTERMSIG(status)
        if killed != signal.SIGKILL:  # SIGKILL's handler cannot be set (OSError), nor needs to be
            signal.signal(killed, signal.SIG_DFL)
        os.kill(os.getpid(), killed)
        return 128 + killed
    return os.waitstatus_to_exitcode(status)


# -- the server's side --------------------------------------------------------------------------

def _child(conn: socket.socket, listener: socket.socket, fds: list[int], request: dict, path: list[str]) -> None:
    """In the forked child: become ``python -m MODULE ARGS`` as the launcher would have run it."""
    import runpy

    listener.close()
    for other in list(_OPEN):
        if other is not conn:
            other.close()
    for fd, target in zip(fds, (0, 1, 2)):
        os.dup2(fd, target)
        os.close(fd)
    sigint = signal.SIG_IGN if request.get("sigint_ignored") else signal.default_int_handler
    for sig in range(1, signal.NSIG):
        try:
            signal.signal(sig, sigint if sig == signal.SIGINT else signal.SIG_DFL)
        except (OSError, ValueError):
            pass  # SIGKILL, SIGSTOP and the like
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    argv = request["argv"]
    sys.argv = [argv[0], *argv[2:]]
    sys.path[:] = path
    if os.environ.get("PYTHONUNBUFFERED"):
        for stream in (sys.stdout, sys.stderr):
            stream.reconfigure(line_buffering=True, write_through=True)  # type: ignore[union-attr]

    def watch() -> None:
        # the launcher only waits from now on: end of file is its death (e.g. SIGKILL)
        try:
            conn.recv(1)
        except OSError:
            pass
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="squall-forkserver-launcher", daemon=True).start()
    code = 0
    try:
        if argv[0] == "-c":
            import types

            main = sys.modules["__main__"] = types.ModuleType("__main__")
            exec(compile(argv[1], "<string>", "exec"), vars(main))  # noqa: S102 (what `python -c` runs)
        else:
            # as in a fresh `python -m`: the module runs as __main__, not as the copy preloaded by its name
            sys.modules.pop(argv[1], None)
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 (as the interpreter would: the traceback, exit 1)
        import traceback

        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


_OPEN: set[socket.socket] = set()  # the server's connections to launchers whose child runs


def _serve_one(conn: socket.socket, listener: socket.socket, own_env: Mapping[str, str], base: list[str],
               loaded: Mapping[str, object]) -> None:
    fds: list[int] = []
    try:
        msg, ancdata, _flags, _addr = conn.recvmsg(65536, socket.CMSG_SPACE(3 * array.array("i").itemsize))
        for level, kind, data in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                got = array.array("i")
                got.frombytes(data[:len(data) - len(data) % got.itemsize])
                fds.extend(got)
        # the socket's directory is the driver user's own (0700); a peer of another uid (root) is not served
        _pid, uid, _gid = _CRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
        (size,) = _HEADER.unpack(msg[:_HEADER.size])
        if uid != os.getuid() or size > _MOST_BYTES:
            raise ValueError(f"a request from uid {uid} of {size} bytes")
        body = msg[_HEADER.size:]
        if len(body) < size:
            body += _recv_exact(conn, size - len(body))
        request = json.loads(body)
        argv = request["argv"]
        path = child_path(request["env"], request["cwd"], base)
        why = None if len(fds) == 3 and len(argv) >= 2 and argv[0] in ("-m", "-c") else "not -m/-c with stdio"
        why = why or refusal(request["env"], own_env, path, loaded)
        if why is not None:
            if own_env.get("SQUALL_SPARK_FORKSERVER_LOG"):
                print(f"squall fork server: {' '.join(argv)} runs on its own: {why}", file=sys.stderr, flush=True)
            conn.sendall(_REPLY.pack(REFUSED))
            conn.close()
            return
        pid = os.fork()
        if pid == 0:
            _child(conn, listener, fds, request, path)  # never returns
        conn.sendall(_REPLY.pack(pid))
    except (OSError, EOFError, ValueError, KeyError, TypeError, struct.error):  # not a launcher's request: not served
        conn.close()
        return
    finally:
        for fd in fds:  # the child has its copies; a launcher refused keeps its own
            os.close(fd)
    _OPEN.add(conn)

    def wait() -> None:
        _, status = os.waitpid(pid, 0)
        try:
            conn.sendall(_REPLY.pack(status))
        except OSError:
            pass  # the launcher is gone
        _OPEN.discard(conn)
        conn.close()

    threading.Thread(target=wait, name=f"squall-forkserver-wait-{pid}", daemon=True).start()


def preload() -> None:
    """Import what Spark's Python processes import, so that each fork has it: pyspark's daemon,
    worker and Data Source planners, the streaming source's runner, pyarrow and pandas, and
    Trident with its Spark modules (what unpickling the source and the bolts needs)."""
    import importlib

    modules = ["pyspark.daemon", "pyspark.worker", "pyspark.sql.worker.lookup_data_sources",
               "pyspark.sql.worker.create_data_source", "pyspark.sql.worker.plan_data_source_read",
               "pyspark.sql.streaming.python_streaming_source_runner", "pyarrow", "pandas",
               "pyspark.sql.pandas.serializers", "squall.trident.spark.source", "squall.trident.spark.runner"]
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            pass  # a process that needs it imports it (or fails) as it would have
    import squall.trident

    for name in squall.trident.__all__:
        getattr(squall.trident, name)


def _loaded() -> dict[str, object]:
    """`where_from` for the top-level modules imported so far that came from a path entry."""
    names = sorted({name.partition(".")[0] for name, m in list(sys.modules.items())
                    if getattr(getattr(m, "__spec__", None), "origin", None) not in (None, "built-in", "frozen")})
    found = where_from(names, sys.path)
    return {name: where for name, where in found.items() if where is not None}


def serve(path: str) -> None:
    """Listen at ``path`` (bound before the imports: a launcher that comes early waits in the
    backlog), preload, then fork a child per request until stdin (the driver's pipe) closes,
    then wait for the children to end. Ctrl-C is ignored: it signals the driver's whole process
    group, this server included, whose KeyboardInterrupt printed a traceback and then a fatal
    error (its stdin thread holding the lock at shutdown) after the driver's own last line; the
    driver's stop closes stdin, which ends the server. Its children take SIGINT as their
    launcher did (ignored when Spark's JVM started it: `run`)."""
    import subprocess

    from .daemon import installed_first

    signal.signal(signal.SIGINT, signal.SIG_IGN)

    sys.path[:] = installed_first(sys.path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    own_env = dict(os.environ)
    # the interpreter's own path, without PYTHONPATH: what a child's PYTHONPATH goes before
    clean = {k: v for k, v in own_env.items() if k != "PYTHONPATH"}
    base = json.loads(subprocess.run([sys.executable, "-c", "import json, sys; print(json.dumps(sys.path[1:]))"],
                                     env=clean, stdout=subprocess.PIPE, check=True).stdout)
    preload()
    loaded = _loaded()
    import gc

    gc.freeze()  # what is preloaded lives as long as the server: its collections need not walk it

    def driver_gone() -> None:
        while sys.stdin.buffer.read(65536):
            pass
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()

    threading.Thread(target=driver_gone, name="squall-forkserver-driver", daemon=True).start()
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            break
        _serve_one(conn, listener, own_env, base, loaded)
    for thread in threading.enumerate():
        if thread.name.startswith("squall-forkserver-wait-"):
            thread.join()


if __name__ == "__main__":
    serve(sys.argv[1])
