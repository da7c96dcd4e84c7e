"""Transactional Trident spouts over tables another job writes: a directory of Parquet files
(`ParquetTridentSpout`) and an append-only Delta table (`DeltaTridentSpout`).

Both are `IPartitionedTridentSpout`s, so they run on squall's engine and, unchanged, on Spark's
(``squall.trident.spark``: a partition's metadata is the offset). Their tuples are the values of
the named columns (``fields``), row by row, in file order. Files are read with pyarrow, from a
local path or a URI pyarrow's file systems open (``s3://``, ``gs://``, ``hdfs://``).

`ParquetTridentSpout`: each Parquet file of the directory is a partition, read once, whole, in
the first batch after it appears (at most ``max_batch_files`` new files a batch, in name order).
Its metadata is ``{"rows", "size"}``; a replay reads the file again and must find the same size
and row count, else `TableSourceError` names the file and the txid. Files are expected to be
put in place complete (Spark's commit protocol moves them out of ``_temporary/``; squall's
`ParquetSinkBolt` renames them): names starting with ``.`` or ``_`` and directories are skipped,
and a file not read yet that does not end with Parquet's footer magic waits for a later batch.

`DeltaTridentSpout`: one partition, the table. A batch reads the commits of versions
``first_version..last_version`` (the range after the previous batch's, up to ``max_batch_files``
data files, at least one commit) from ``_delta_log/<version>.json``: the files each commit added
with ``dataChange``. The log's commits never change, so a replay reads exactly the same files.
Commits that change no data (OPTIMIZE's rewrites, ``dataChange: false``; metadata changes) add
nothing. A commit that removes data (DELETE, UPDATE, MERGE, an overwrite) is an error naming the
table, the version and the operation, raised by the batch it would start (the appends before it
are read first): rows the spout emitted would be taken back, which no Trident state can undo.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from .._errors import SquallError
from .._fields import Fields
from .._stable_hash import stable_hash_one
from ..trident.partitioned import IPartitionedTridentSpout
from ._regular import NotRegular, open_regular

__all__ = ["DeltaTridentSpout", "ParquetTridentSpout", "TableSourceError"]

_MAGIC = b"PAR1"
_COMMIT = re.compile(r"^(\d{20})\.json$")


class TableSourceError(SquallError, ValueError):
    """A Parquet directory or Delta table the spout cannot read as it must (named in the message)."""


@dataclass(frozen=True)
class TablePartition:
    """A partition of a table spout: a Parquet file's name, or a Delta table's URI."""

    name: str

    def get_id(self) -> str:
        """The file's name, or the table's URI."""
        return self.name


class _Location:
    """A directory on a pyarrow file system: where the spout reads, named as the user gave it."""

    def __init__(self, uri: str) -> None:
        try:
            if "://" in uri:
                self.fs, self.root = pafs.FileSystem.from_uri(uri)
            else:
                self.fs, self.root = pafs.LocalFileSystem(), os.path.abspath(uri)
        except (pa.ArrowException, ValueError) as e:
            raise TableSourceError(f"{uri}: not a path or URI pyarrow can open ({e})") from None

    def path(self, name: str) -> str:
        return f"{self.root.rstrip('/')}/{name}"

    def is_dir(self) -> bool:
        return self.fs.get_file_info(self.root).type == pafs.FileType.Directory

    def listing(self, name: str = "") -> list[pafs.FileInfo]:
        return self.fs.get_file_info(pafs.FileSelector(self.path(name) if name else self.root))

    def is_local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    def is_link(self, path: str) -> bool:
        """Whether ``path`` is a symbolic link on a local file system (which pyarrow follows):
        whoever writes the directory could link in a file only the workers' user may read."""
        return isinstance(self.fs, pafs.LocalFileSystem) and os.path.islink(path)


def _read_columns(location: _Location, name: str, fields: Sequence[str], constants: Mapping[str, Any],
                  where: str) -> list[list]:
    """The rows of Parquet file ``name`` as value lists of ``fields`` (those in ``constants``
    are not in the file: a Delta partition column's value)."""
    path = location.path(name)
    in_file = [f for f in fields if f not in constants]
    try:
        # on a local directory the open itself refuses a link (a check before it left the time
        # between the two to put one in the listed file's place)
        opened = open_regular(path) if location.is_local() else location.fs.open_input_file(path)
        with opened as f:
            parquet = pq.ParquetFile(f)
            missing = [n for n in in_file if n not in parquet.schema_arrow.names]
            if missing:
                raise TableSourceError(f"{where}: {path} has no column {', '.join(map(repr, missing))} (its columns: "
                                       f"{', '.join(parquet.schema_arrow.names)})")
            table = parquet.read(columns=in_file)
    except FileNotFoundError:
        raise TableSourceError(f"{where}: {path} is gone (deleted, or removed by Delta's VACUUM)") from None
    except NotRegular as e:
        raise TableSourceError(f"{where}: {path} is {e.strerror}") from None
    except (OSError, pa.ArrowException) as e:
        raise TableSourceError(f"{where}: {path} cannot be read as Parquet ({e})") from None
    columns = [table.column(f).to_pylist() if f in in_file else [constants[f]] * table.num_rows for f in fields]
    return [list(row) for row in zip(*columns)]


# -- Parquet directory --------------------------------------------------------------------------

class _ParquetCoordinator(IPartitionedTridentSpout.Coordinator):
    def __init__(self, spout: ParquetTridentSpout) -> None:
        self.spout = spout
        self.location = _Location(spout.directory)

    def get_partitions_for_batch(self) -> list[str]:
        """The names of the directory's files that may be Parquet, sorted."""
        try:
            infos = self.location.listing()
        except (OSError, pa.ArrowException) as e:
            raise TableSourceError(f"ParquetTridentSpout: cannot list {self.spout.directory}: {e}") from None
        return sorted(info.base_name for info in infos
                      if info.type == pafs.FileType.File and not info.base_name.startswith((".", "_"))
                      and not info.base_name.endswith((".crc", ".inprogress", ".tmp"))
                      and not self.location.is_link(info.path))  # as FileSpout: no symbolic link is read


class _ParquetEmitter(IPartitionedTridentSpout.Emitter):
    def __init__(self, spout: ParquetTridentSpout) -> None:
        self.spout = spout
        self.location = _Location(spout.directory)

    def get_ordered_partitions(self, all_partition_info: Any) -> list[TablePartition]:
        """The files, by name."""
        return [TablePartition(n) for n in sorted(all_partition_info)]

    def get_partitions_for_task(self, task_index: int, num_tasks: int, ordered: list) -> list:
        """The files whose name hashes to this task (none changes task as files come)."""
        return [p for p in ordered if stable_hash_one(p.name) % num_tasks == task_index]

    def _complete(self, name: str) -> int | None:
        """The file's size once it ends with Parquet's magic (written last), else None: a file
        being written, or gone since the listing, waits for a later batch."""
        path = self.location.path(name)
        try:
            size = self.location.fs.get_file_info(path).size
            if size is None or size < 12:
                return None
            with self.location.fs.open_input_file(path) as f:
                f.seek(size - 4)
                return size if f.read(4) == _MAGIC else None
        except (OSError, pa.ArrowException):
            return None

    def _read(self, name: str, txid: int) -> list[list]:
        return _read_columns(self.location, name, self.spout.fields, {},
                             f"ParquetTridentSpout {self.spout.directory} txid {txid}")

    def emit_batch_new(self, tx: Any, collector: Any, partitions: set, last_partition_meta: Mapping) -> dict:
        """The complete files not read yet, whole, up to ``max_batch_files`` of them by name."""
        new = sorted((p for p in partitions if last_partition_meta.get(p) is None), key=TablePartition.get_id)
        metas: dict[TablePartition, dict[str, int]] = {}
        for p in new:
            if len(metas) == self.spout.max_batch_files:
                break
            size = self._complete(p.name)
            if size is None:
                continue
            rows = self._read(p.name, tx.txid)
            for values in rows:
                collector.emit(values)
            metas[p] = {"rows": len(rows), "size": size}
        return metas

    def covers_records(self, partition_meta: Any) -> bool:
        """True: a file in a batch is read, whole, once, also one of no rows (the batch after
        it reads the next files)."""
        return True

    def re_emit_partition_batch(self, tx: Any, collector: Any, partition: Any, partition_meta: Any) -> None:
        """The file again; one whose size or row count changed is an error naming it."""
        path = self.location.path(partition.name)
        rows = self._read(partition.name, tx.txid)
        size = self.location.fs.get_file_info(path).size
        if size != partition_meta["size"] or len(rows) != partition_meta["rows"]:
            raise TableSourceError(f"ParquetTridentSpout: replaying txid {tx.txid}: {path} was {partition_meta['size']} "
                                   f"bytes and {partition_meta['rows']} rows when read, it is {size} bytes and "
                                   f"{len(rows)} rows now: files must not change once in place")
        for values in rows:
            collector.emit(values)


class ParquetTridentSpout(IPartitionedTridentSpout):
    """A transactional Trident spout over the Parquet files of ``directory`` (see the module
    docstring): each file read once, whole, its ``fields`` columns a tuple per row;
    ``max_batch_files``: new files per batch (per spout task on squall's engine)."""

    def __init__(self, directory: str | os.PathLike, fields: Sequence[str], *, max_batch_files: int = 100) -> None:
        if max_batch_files < 1:
            raise ValueError(f"ParquetTridentSpout({directory}): max_batch_files must be >= 1")
        if not fields:
            raise ValueError(f"ParquetTridentSpout({directory}): fields must name at least one column")
        self.directory = str(directory)
        self.fields = list(fields)
        self.max_batch_files = max_batch_files

    def get_coordinator(self, conf: dict, context: Any) -> IPartitionedTridentSpout.Coordinator:
        """Lists the directory."""
        coordinator = _ParquetCoordinator(self)
        if not coordinator.location.is_dir():
            raise TableSourceError(f"ParquetTridentSpout: {self.directory} is not a directory")
        return coordinator

    def get_emitter(self, conf: dict, context: Any) -> IPartitionedTridentSpout.Emitter:
        """Reads the task's files."""
        return _ParquetEmitter(self)

    def get_output_fields(self) -> Fields:
        """``fields``."""
        return Fields(self.fields)


# -- Delta table --------------------------------------------------------------------------------

@dataclass(frozen=True)
class _AddedFile:
    """A data file a commit added, and its partition columns' values (strings, as the log has them)."""

    path: str
    partition_values: Mapping[str, str | None]


# The actions `_DeltaLog.added` reads, and what each must be: its fields are read without a check
_ACTION_SHAPES: dict[str, tuple[tuple[str, type], ...]] = {
    "commitInfo": (), "remove": (), "metaData": (("schemaString", str),),
    "add": (("path", str), ("partitionValues", dict)),
}


def _commit_actions(data: bytes, where: str) -> list[dict[str, Any]]:
    """The actions of a Delta commit file's bytes ``data``; ``where`` names the table and file.

    The log is read as hostile input (another writer's, a file put there by hand): a line that is
    not a JSON object, or an action `added` reads that is not of its shape, is a
    `TableSourceError` naming the file and line, where the bare ``JSONDecodeError``,
    ``AttributeError`` or ``KeyError`` named neither. An empty file is a commit of no action, as
    deltalake reads it.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TableSourceError(f"{where} is not UTF-8 text ({e})") from None
    actions = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except (ValueError, RecursionError) as e:  # RecursionError: "[[[[..." nested too deep
            raise TableSourceError(f"{where}: line {n} is not JSON ({type(e).__name__}: {str(e)[:200]})") from None
        if not isinstance(action, dict):
            raise TableSourceError(f"{where}: line {n} is not a Delta action (a JSON object)")
        for kind, fields in _ACTION_SHAPES.items():
            body = action.get(kind)
            if kind in action and not (isinstance(body, dict) and all(
                    isinstance(body.get(k), t) or (k == "partitionValues" and body.get(k) is None) for k, t in fields)):
                wanted = "".join(f", {k} a {t.__name__}" for k, t in fields)
                raise TableSourceError(f"{where}: line {n}: its {kind!r} action is not a JSON object{wanted}")
        actions.append(action)
    return actions


class _DeltaLog:
    """The commits of a Delta table's ``_delta_log``, read as the spout needs them."""

    def __init__(self, spout: DeltaTridentSpout) -> None:
        self.spout = spout
        self.location = _Location(spout.table_uri)

    def check_table(self) -> pa.Schema:
        """The table's Arrow schema, once it is a Delta table with the spout's fields."""
        from deltalake import DeltaTable
        from deltalake.exceptions import DeltaError, TableNotFoundError

        uri = self.spout.table_uri
        try:
            table = DeltaTable(uri, storage_options=self.spout.storage_options)
        except TableNotFoundError:
            raise TableSourceError(f"DeltaTridentSpout: {uri} is not a Delta table (no _delta_log with a commit)") from None
        except (DeltaError, OSError) as e:
            raise TableSourceError(f"DeltaTridentSpout: {uri} cannot be opened as a Delta table ({e})") from None
        schema = pa.schema(table.schema().to_arrow())
        missing = [f for f in self.spout.fields if f not in schema.names]
        if missing:
            raise TableSourceError(f"DeltaTridentSpout: table {uri} has no column {', '.join(map(repr, missing))} "
                                   f"(its columns: {', '.join(schema.names)})")
        mode = table.metadata().configuration.get("delta.columnMapping.mode", "none")
        if mode != "none":
            raise TableSourceError(f"DeltaTridentSpout: table {uri} uses column mapping ({mode!r}), which the spout "
                                   "does not read (its Parquet columns are not the table's names)")
        return schema

    def versions_from(self, first: int) -> list[int]:
        """The versions committed from ``first`` on, in order (a gap before them is an error)."""
        try:
            infos = self.location.listing("_delta_log")
        except (OSError, pa.ArrowException) as e:
            raise TableSourceError(f"DeltaTridentSpout: cannot list {self.spout.table_uri}/_delta_log: {e}") from None
        found = sorted(int(m.group(1)) for info in infos if (m := _COMMIT.match(info.base_name)))
        later = [v for v in found if v >= first]
        if later and later[0] != first:
            raise TableSourceError(f"DeltaTridentSpout: table {self.spout.table_uri}: the commit of version {first} is "
                                   f"no longer in _delta_log (the oldest there is {found[0]}; log retention removed "
                                   "it?): start the spout at a later starting_version")
        return later

    def added(self, version: int) -> list[_AddedFile]:
        """The data files commit ``version`` added, or an error if it removed data."""
        uri = self.spout.table_uri
        name = f"_delta_log/{version:020d}.json"
        try:
            with self.location.fs.open_input_stream(self.location.path(name)) as f:
                data = f.read()
        except FileNotFoundError:
            raise TableSourceError(f"DeltaTridentSpout: table {uri}: the commit of version {version} is no longer in "
                                   "_delta_log (log retention removed it?)") from None
        actions = _commit_actions(data, f"DeltaTridentSpout: table {uri}: {name}")
        operation = next((a["commitInfo"].get("operation", "?") for a in actions if "commitInfo" in a), "?")
        files = []
        for action in actions:
            if "remove" in action and action["remove"].get("dataChange", True):
                raise TableSourceError(
                    f"DeltaTridentSpout: table {uri} version {version} ({operation}) removes data "
                    f"({action['remove'].get('path')}): the spout reads an append-only table, and rows it emitted "
                    "cannot be taken back; write this table with appends only (OPTIMIZE is fine)")
            if "metaData" in action:
                self._check_schema(version, action["metaData"].get("schemaString", "{}"))
            add = action.get("add")
            if add is not None and add.get("dataChange", True):
                if add.get("deletionVector"):
                    raise TableSourceError(f"DeltaTridentSpout: table {uri} version {version} ({operation}) adds "
                                           f"{add['path']} with a deletion vector: not an append")
                path = unquote(add["path"])
                if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", path):
                    raise TableSourceError(f"DeltaTridentSpout: table {uri} version {version} adds {path}, a file "
                                           "outside the table (a shallow clone?), which the spout does not read")
                if path.startswith("/") or ".." in path.split("/"):
                    # a path Delta never writes: "../x.parquet" read any Parquet file the workers'
                    # user may read, for whoever may write the table's log
                    raise TableSourceError(f"DeltaTridentSpout: table {uri} version {version} adds {path}, a path "
                                           "out of the table's directory, which the spout does not read")
                files.append(_AddedFile(path, dict(add.get("partitionValues") or {})))
        return files

    def _check_schema(self, version: int, schema_string: str) -> None:
        try:
            fields = json.loads(schema_string).get("fields", [])
            names = [f.get("name") for f in fields]
        except (ValueError, AttributeError, TypeError, RecursionError) as e:
            raise TableSourceError(f"DeltaTridentSpout: table {self.spout.table_uri} version {version}: its metaData's "
                                   f"schemaString is not a Delta schema ({type(e).__name__}: {str(e)[:200]})") from None
        missing = [f for f in self.spout.fields if f not in names]
        if missing:
            raise TableSourceError(f"DeltaTridentSpout: table {self.spout.table_uri} version {version} changes the "
                                   f"schema to one without {', '.join(map(repr, missing))} (columns: {', '.join(names)})")


class _DeltaCoordinator(IPartitionedTridentSpout.Coordinator):
    def __init__(self, spout: DeltaTridentSpout) -> None:
        self.spout = spout

    def get_partitions_for_batch(self) -> str:
        """The table: its one partition."""
        return self.spout.table_uri


class _DeltaEmitter(IPartitionedTridentSpout.Emitter):
    def __init__(self, spout: DeltaTridentSpout) -> None:
        self.spout = spout
        self.log = _DeltaLog(spout)
        self._schema: pa.Schema | None = None

    def get_ordered_partitions(self, all_partition_info: Any) -> list[TablePartition]:
        """The table."""
        return [TablePartition(str(all_partition_info))]

    def _rows(self, versions: Sequence[int], files: Sequence[_AddedFile], txid: int) -> list[list]:
        if self._schema is None:
            self._schema = self.log.check_table()
        where = f"DeltaTridentSpout {self.spout.table_uri} txid {txid} (versions {versions[0]}..{versions[-1]})"
        rows: list[list] = []
        for added in files:
            constants = {f: self._partition_value(added, f) for f in self.spout.fields if f in added.partition_values}
            rows.extend(_read_columns(self.log.location, added.path, self.spout.fields, constants, where))
        return rows

    def _partition_value(self, added: _AddedFile, field: str) -> Any:
        assert self._schema is not None
        text = added.partition_values[field]
        if text is None:
            return None
        return pc.cast(pa.scalar(text), self._schema.field(field).type).as_py()

    def emit_batch_new(self, tx: Any, collector: Any, partitions: set, last_partition_meta: Mapping) -> dict:
        """The commits after the previous batch's, up to ``max_batch_files`` data files."""
        metas: dict[TablePartition, dict[str, int]] = {}
        for p in partitions:
            last = last_partition_meta.get(p)
            first = int(last["last_version"]) + 1 if last else self.spout.starting_version
            versions: list[int] = []
            files: list[_AddedFile] = []
            for version in self.log.versions_from(first):
                try:
                    added = self.log.added(version)
                except TableSourceError:
                    if not versions:
                        raise
                    break  # the appends before it are a batch; the next batch stops at it
                if versions and len(files) + len(added) > self.spout.max_batch_files:
                    break
                versions.append(version)
                files.extend(added)
            if not versions:
                continue  # no new commit: the partition has no range in this batch
            rows = self._rows(versions, files, tx.txid)
            for values in rows:
                collector.emit(values)
            metas[p] = {"first_version": versions[0], "last_version": versions[-1], "files": len(files),
                        "rows": len(rows)}
        return metas

    def covers_records(self, partition_meta: Any) -> bool:
        """True: a batch covers its commits, also ones that add no row (a file of no rows, a
        commit that adds none: the batch after it starts at the next commit)."""
        return True

    def re_emit_partition_batch(self, tx: Any, collector: Any, partition: Any, partition_meta: Any) -> None:
        """The same commits' files again: the same rows, or an error naming the table."""
        versions = list(range(int(partition_meta["first_version"]), int(partition_meta["last_version"]) + 1))
        files = [f for v in versions for f in self.log.added(v)]
        rows = self._rows(versions, files, tx.txid)
        if len(files) != partition_meta["files"] or len(rows) != partition_meta["rows"]:
            raise TableSourceError(f"DeltaTridentSpout: replaying txid {tx.txid}: versions {versions[0]}..{versions[-1]} "
                                   f"of {self.spout.table_uri} were {partition_meta['files']} files and "
                                   f"{partition_meta['rows']} rows when read, {len(files)} and {len(rows)} now")
        for values in rows:
            collector.emit(values)


class DeltaTridentSpout(IPartitionedTridentSpout):
    """A transactional Trident spout over the appends to the Delta table at ``table_uri`` (see the
    module docstring): its ``fields`` columns a tuple per row (partition columns too), from
    ``starting_version`` on; ``max_batch_files``: data files per batch (whole commits, at least
    one); ``storage_options`` go to ``deltalake`` when it checks the table."""

    def __init__(self, table_uri: str | os.PathLike, fields: Sequence[str], *, starting_version: int = 0,
                 max_batch_files: int = 1000, storage_options: dict[str, str] | None = None) -> None:
        if max_batch_files < 1:
            raise ValueError(f"DeltaTridentSpout({table_uri}): max_batch_files must be >= 1")
        if starting_version < 0:
            raise ValueError(f"DeltaTridentSpout({table_uri}): starting_version must be >= 0")
        if not fields:
            raise ValueError(f"DeltaTridentSpout({table_uri}): fields must name at least one column")
        self.table_uri = str(table_uri)
        self.fields = list(fields)
        self.starting_version = starting_version
        self.max_batch_files = max_batch_files
        self.storage_options = storage_options

    def get_coordinator(self, conf: dict, context: Any) -> IPartitionedTridentSpout.Coordinator:
        """Checks the table (a Delta table with the fields)."""
        _DeltaLog(self).check_table()
        return _DeltaCoordinator(self)

    def get_emitter(self, conf: dict, context: Any) -> IPartitionedTridentSpout.Emitter:
        """Reads the table's commits."""
        return _DeltaEmitter(self)

    def get_output_fields(self) -> Fields:
        """``fields``."""
        return Fields(self.fields)
