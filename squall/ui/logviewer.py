"""Storm's logviewer over the workers' logs: pure functions over a log root, and the starlette
routes the UI daemon serves them with under ``/api/v1/`` (docs/logs.md).

The root is the workers' artifacts directory
(`squall.cluster.logs.artifacts_root`: ``<storm.log.dir>/workers-artifacts``); a file is named
relative to it, ``<topology-id>/<port>/worker.log``, as Storm's ``file=`` parameter. Every
name is hostile: `resolve_log_file` refuses an absolute path, ``..``, a symlink that leads out
of the root, anything but a regular file, and a name longer than `MAX_FILE_PARAM`. A refused
or bad request gets Storm's error JSON, ``{"error": "<status> <reason>", "errorMessage": ...}``
with 400 or 404, never a traceback.

Storm's limits: a page is ``length`` bytes (default 51200, at most 10 MiB) from ``start``
(default: the last page, the tail); a search string is 1 to 1024 UTF-8 bytes, with 128 bytes
of context each side of a match.
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple, overload
from urllib.parse import quote, urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

DEFAULT_LENGTH = 51200  # Storm's default page
MAX_LENGTH = 10 * 1024 * 1024  # Storm's largest page
MAX_SEARCH_BYTES = 1024  # Storm's longest search string
SEARCH_CONTEXT = 128  # bytes shown each side of a match (Storm's grep-context-size)
DEFAULT_NUM_MATCHES = 10
MAX_NUM_MATCHES = 1000
MAX_FILE_PARAM = 1024  # longer file names are refused before any path is built
_SEARCH_CHUNK = 1 << 20


class LogviewerError(Exception):
    """A request the logviewer refuses: ``status`` (400, 404) and a message naming what was wrong."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


_REASONS = {400: "Bad Request", 404: "Not Found"}


def error_body(status: int, message: str) -> dict[str, str]:
    """Storm's error JSON."""
    return {"error": f"{status} {_REASONS.get(status, '')}".strip(), "errorMessage": message}


def _read_to(f: BinaryIO, size: int) -> Iterator[bytes]:
    """The first ``size`` bytes of ``f``, in chunks; ``f`` closed at the end."""
    try:
        while size > 0:
            chunk = f.read(min(size, _SEARCH_CHUNK))
            if not chunk:  # cut short under the download (truncated in place): the client sees it short
                break
            size -= len(chunk)
            yield chunk
    finally:
        f.close()


# --- the pure core -----------------------------------------------------------------------------------------

def resolve_log_file(root: Path, name: str | None) -> Path:
    """The file ``name`` (relative to ``root``) names, if it is a regular file inside ``root``
    once every symlink is followed; else `LogviewerError` (400 for a bad name, 404 for none)."""
    if not name:
        raise LogviewerError(400, "missing parameter file")
    if len(name) > MAX_FILE_PARAM or "\x00" in name:
        raise LogviewerError(400, f"file name too long or malformed (at most {MAX_FILE_PARAM} characters)")
    if name.startswith(("/", "\\")) or os.path.isabs(name):
        raise LogviewerError(400, f"file {name!r} is an absolute path; name it relative to the log root")
    if any(part == ".." for part in name.replace("\\", "/").split("/")):
        raise LogviewerError(400, f"file {name!r} leaves the log root")
    real_root = root.resolve()
    try:
        path = (real_root / name).resolve()
    except (RuntimeError, OSError) as e:  # a symlink loop (RuntimeError up to Python 3.12)
        raise LogviewerError(400, f"file {name!r} cannot be followed to a file: {e}") from None
    if not path.is_relative_to(real_root):
        raise LogviewerError(400, f"file {name!r} leaves the log root")
    if not path.is_file():
        raise LogviewerError(404, f"no log file {name!r}")
    return path


@overload
def _int_param(params: Any, key: str, default: int, low: int, high: int) -> int: ...
@overload
def _int_param(params: Any, key: str, default: None, low: int, high: int) -> int | None: ...
def _int_param(params: Any, key: str, default: int | None, low: int, high: int) -> int | None:
    """The integer query parameter ``key`` (``default`` when absent), between ``low`` and ``high``."""
    raw = params.get(key)
    if raw is None or raw == "":
        return default
    if len(raw) > 20:
        raise LogviewerError(400, f"parameter {key} is too long")
    try:
        value = int(raw)
    except ValueError:
        raise LogviewerError(400, f"parameter {key} must be an integer, not {raw[:40]!r}") from None
    if not low <= value <= high:
        raise LogviewerError(400, f"parameter {key} must be between {low} and {high}, not {value}")
    return value


class LogPage(NamedTuple):
    """``length`` bytes of a file of ``size`` bytes from ``start``, as text."""

    start: int
    length: int
    size: int
    text: str


def read_page(path: Path, start: int | None, length: int = DEFAULT_LENGTH) -> LogPage:
    """The page of ``path`` at ``start`` (None: the last ``length`` bytes, the tail)."""
    size = path.stat().st_size
    if start is None:
        start = max(0, size - length)
    if start > size:
        raise LogviewerError(400, f"start {start} is past the end of the file ({size} bytes)")
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read(length)
    return LogPage(start, len(data), size, data.decode("utf-8", "replace"))


class Match(NamedTuple):
    """One match of a search: its byte offset and up to `SEARCH_CONTEXT` bytes each side."""

    byte_offset: int
    before: str
    match: str
    after: str


def search_file(path: Path, needle: bytes, start: int = 0, num_matches: int = DEFAULT_NUM_MATCHES
                ) -> tuple[list[Match], int | None]:
    """The first ``num_matches`` matches of ``needle`` at or after byte ``start``, and the offset
    to search on from (None: the file has no more), as Storm's substring search."""
    if not 1 <= len(needle) <= MAX_SEARCH_BYTES:
        raise LogviewerError(400, f"search-string must be between 1 and {MAX_SEARCH_BYTES} UTF-8 bytes")
    size = path.stat().st_size
    if start > size:
        raise LogviewerError(400, f"start-byte-offset {start} is past the end of the file ({size} bytes)")
    matches: list[Match] = []
    with open(path, "rb") as f:
        pos = start
        while pos < size and len(matches) < num_matches:
            f.seek(pos)
            chunk = f.read(_SEARCH_CHUNK + len(needle) - 1)
            if len(chunk) < len(needle):  # the end, sooner than its size said: cut short under the search
                pos = size
                break
            i = chunk.find(needle)
            if i < 0:
                pos += max(1, len(chunk) - len(needle) + 1)
                continue
            at = pos + i
            lo = max(0, at - SEARCH_CONTEXT)
            f.seek(lo)
            around = f.read(at - lo + len(needle) + SEARCH_CONTEXT)
            cut = at - lo
            matches.append(Match(at, _text(around[:cut]), needle.decode("utf-8", "replace"),
                                 _text(around[cut + len(needle):])))
            pos = at + len(needle)
    return matches, (pos if pos < size else None)


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def list_logs(root: Path, topology_id: str | None = None, port: int | None = None) -> list[str]:
    """The worker logs under ``root`` (names relative to it, sorted): of one topology, of one
    port, or all. Symlinks are not followed."""
    real_root = root.resolve()
    if not real_root.is_dir():
        return []
    out: list[str] = []
    for topo in sorted(p for p in real_root.iterdir() if p.is_dir() and not p.is_symlink()):
        if topology_id is not None and topo.name != topology_id:
            continue
        for pdir in sorted(p for p in topo.iterdir() if p.is_dir() and not p.is_symlink()):
            if port is not None and pdir.name != str(port):
                continue
            out.extend(f"{topo.name}/{pdir.name}/{f.name}" for f in sorted(pdir.iterdir())
                       if f.is_file() and not f.is_symlink())
    return out


# --- the routes ------------------------------------------------------------------------------------------

def logviewer_routes(log_root: Path) -> list[Route]:
    """Storm's logviewer routes over ``log_root`` (the workers' artifacts directory), to mount at
    the UI daemon's root: ``/api/v1/log``, ``/api/v1/download``, ``/api/v1/search/{file}``,
    ``/api/v1/listLogs``."""
    root = Path(log_root)

    def guarded(handler: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            try:
                # a page is up to 10 MiB and a search may scan a whole log: on a worker thread,
                # so that the event loop goes on serving every other request meanwhile
                return await run_in_threadpool(handler, request)
            except LogviewerError as e:
                return JSONResponse(error_body(e.status, e.message), status_code=e.status)
            except OSError as e:  # rotated away between the check and the read, unreadable
                return JSONResponse(error_body(404, f"cannot read the log: {e.strerror or e}"), status_code=404)
        return endpoint

    def log(request: Request) -> Response:
        q = request.query_params
        name = q.get("file") or ""  # refused by resolve_log_file, as a missing one
        path = resolve_log_file(root, name)
        length = _int_param(q, "length", DEFAULT_LENGTH, 1, MAX_LENGTH)
        start = _int_param(q, "start", None, 0, 1 << 62)
        page = read_page(path, start, length)
        grep = q.get("grep")
        if grep is not None and len(grep.encode()) > MAX_SEARCH_BYTES:
            raise LogviewerError(400, f"grep must be at most {MAX_SEARCH_BYTES} UTF-8 bytes")
        return HTMLResponse(_page_html(name, page, length, grep))

    def download(request: Request) -> Response:
        name = request.query_params.get("file") or ""  # refused by resolve_log_file, as a missing one
        path = resolve_log_file(root, name)
        # the bytes the file held when opened, however its worker writes on: a size taken from
        # the open file and read to, never to the end (a live log would overrun its own
        # Content-Length), and the file read from the open descriptor once it is rotated away
        f = path.open("rb")
        size = os.fstat(f.fileno()).st_size
        filename = quote(name.replace("/", "-"))  # topo-port-worker.log, as Storm names it
        return StreamingResponse(_read_to(f, size), media_type="text/plain", headers={
            "content-length": str(size), "content-disposition": f"attachment; filename=\"{filename}\""})

    def search(request: Request) -> Response:
        q = request.query_params
        name = request.path_params["file"]
        path = resolve_log_file(root, name)
        needle = q.get("search-string") or ""
        if len(needle) > MAX_SEARCH_BYTES:
            raise LogviewerError(400, f"search-string must be between 1 and {MAX_SEARCH_BYTES} UTF-8 bytes")
        start = _int_param(q, "start-byte-offset", 0, 0, 1 << 62)
        num = _int_param(q, "num-matches", DEFAULT_NUM_MATCHES, 1, MAX_NUM_MATCHES)
        matches, next_offset = search_file(path, needle.encode(), start, num)
        body: dict[str, Any] = {
            "isDaemon": "no", "searchString": needle, "startByteOffset": start,
            "matches": [{"byteOffset": m.byte_offset, "beforeString": m.before, "matchString": m.match,
                         "afterString": m.after,
                         "logviewerURL": _log_url(name, max(0, m.byte_offset - DEFAULT_LENGTH // 2))}
                        for m in matches]}
        if next_offset is not None:
            body["nextByteOffset"] = next_offset
        return JSONResponse(body)

    def list_route(request: Request) -> Response:
        q = request.query_params
        topo = q.get("topoId")
        if topo is not None and (len(topo) > MAX_FILE_PARAM or "/" in topo or topo in (".", "..")):
            raise LogviewerError(400, "topoId must be a topology id")
        port = _int_param(q, "port", None, 0, 65535)
        return JSONResponse(list_logs(root, topo or None, port))

    return [Route("/api/v1/log", guarded(log)), Route("/api/v1/download", guarded(download)),
            Route("/api/v1/search/{file:path}", guarded(search)),
            Route("/api/v1/listLogs", guarded(list_route))]


def _log_url(name: str, start: int | None = None, length: int | None = None, grep: str | None = None) -> str:
    params: dict[str, Any] = {"file": name}
    if start is not None:
        params["start"] = start
    if length is not None:
        params["length"] = length
    if grep:
        params["grep"] = grep
    return "/api/v1/log?" + urlencode(params, quote_via=quote)


def _page_html(name: str, page: LogPage, length: int, grep: str | None) -> str:
    """Storm's log page: the text (only the lines holding ``grep`` if given) and a pager."""
    text = page.text
    if grep:
        text = "".join(line for line in text.splitlines(keepends=True) if grep in line)
    links = [("First", 0), ("Prev", max(0, page.start - length)),
             ("Next", min(max(0, page.size - length), page.start + length)), ("Last", max(0, page.size - length))]
    pager = " | ".join(f'<a href="{html.escape(_log_url(name, s, length, grep))}">{label}</a>' for label, s in links)
    dl = "/api/v1/download?" + urlencode({"file": name}, quote_via=quote)
    return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(name)}</title></head><body>"
            f"<h3>{html.escape(name)}</h3><p>bytes {page.start}-{page.start + page.length} of {page.size} | "
            f"{pager} | <a href=\"{html.escape(dl)}\">Download Full File</a></p>"
            f"<pre id=\"logContent\">{html.escape(text)}</pre></body></html>")
