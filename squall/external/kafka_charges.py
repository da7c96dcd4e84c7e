"""The Kafka spout's retry budgets that outlive its worker, kept in Kafka itself: in the metadata
of the consumer group's committed offset of each partition.

A record that kills the spout's own worker (a bolt beside it under ``topology.bolt.fail.fast``,
``os._exit``, a segfault) is never failed, so a count kept in memory starts afresh at every
restart and the record is replayed for ever. The Redis Streams and file spouts keep their counts
beside their progress; a Kafka spout's progress is its group's committed offsets, and each
partition's commit carries a metadata string (storm-kafka-client writes its ``topologyId`` and
``taskId`` there, and squall did already). So the budgets go there too: they are committed
atomically with the offset they belong to, live exactly as long as the group's offsets (deleting
the group, or resetting its offsets with ``kafka-consumer-groups --reset-offsets``, which commits
without metadata, forgets them), need nothing outside Kafka, and are read back by the same
``committed()`` call that resumes the partition. Besides ``topologyId`` and ``taskId``, a
partition's metadata holds (`PartitionCharges`):

- ``"emittedTo"``: the offset this partition's task may have emitted records up to (exclusive),
  written before a record at or past it goes out, `READ_AHEAD` offsets ahead: a record from the
  committed offset up to it, read again after a restart, is a suspect
  (`squall.external.retry.AloneGate`);
- ``"charged"``: offset -> ``"<retries> <deaths> <tag>"``, or ``"<retries> <deaths> <level> <tag>"``
  if the level is not 0, the `squall.external.retry.Charge` of each record that went out as a
  suspect (its level raised in a group, its charge as a death alone, and the failures it caused
  since), with the record's `record_tag`; a charge of two numbers, as written before levels, is
  level 0;
- ``"dead"``: offset -> tag, the suspects given up to the dead letters whose offset is not
  committed yet (read again after a death, they count as done without a second dead letter).

A charge applies only to the record it was written for: an offset whose record's tag differs (a
topic deleted and created again under offsets the group kept) drops it. Kafka refuses metadata
above the broker's ``offset.metadata.max.bytes`` (default 4096), so the text is kept within
`METADATA_MAX_BYTES`: what does not fit is dropped, dead marks first, then the marks of a level
alone (lost, a suspect only goes in a group again), then the charges with the fewest deaths
(`charges_metadata` says how many).

Pure: text in, text out; the spout does the I/O.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .retry import Charge

# How far past the record it emits a task writes that it may have emitted: one commit per that
# many records of a partition; after a death, at most that many records that never went out are
# emitted alone once (the file spout's READ_AHEAD_LINES, for the same trade).
READ_AHEAD = 512
# Kafka's default offset.metadata.max.bytes: a commit with longer metadata is refused.
METADATA_MAX_BYTES = 4096
# The most dead marks a commit's metadata can hold: each takes at least ``"0":"<tag>",``.
MAX_DEAD_MARKS = METADATA_MAX_BYTES // len('"0":"01234567",')
_KEYS = ("emittedTo", "charged", "dead")
_TAG = re.compile(r"[0-9a-f]{8}")


class MalformedCharges(ValueError):
    """A partition's commit metadata has the budgets' keys, malformed; the message says how."""


class TaggedCharge(NamedTuple):
    """A record's `Charge` and the `record_tag` of the record it was written for."""

    charge: Charge
    tag: str


@dataclass
class PartitionCharges:
    """One partition's retry budgets as its commit metadata keeps them (the module docstring)."""

    emitted_to: int = 0
    charged: dict[int, TaggedCharge] = field(default_factory=dict)
    dead: dict[int, str] = field(default_factory=dict)

    def prune(self, committed: int) -> None:
        """Forgets what lies below ``committed``: those records are done."""
        self.charged = {o: c for o, c in self.charged.items() if o >= committed}
        self.dead = {o: t for o, t in self.dead.items() if o >= committed}


def _part(value: Any) -> bytes:
    if value is None:
        return b"n"
    if isinstance(value, bytes):
        return b"b" + value
    return b"r" + repr(value).encode()


def record_tag(key: Any, value: Any) -> str:
    """Eight hex digits of a hash of a record's key and value: what tells the record a charge
    was written for from another one at the same offset."""
    k = _part(key)
    h = hashlib.blake2b(len(k).to_bytes(8, "big") + k + _part(value), digest_size=4)
    return h.hexdigest()


def _offset(key: Any) -> int:
    if not isinstance(key, str) or not (key.isascii() and key.isdigit()) or str(int(key)) != key:
        raise MalformedCharges(f"offset {key!r} is not a decimal integer >= 0")
    return int(key)


def _tag(value: Any) -> str:
    if not isinstance(value, str) or not _TAG.fullmatch(value):
        raise MalformedCharges(f"record tag {value!r} is not 8 hex digits")
    return value


def read_charges(metadata: str | None) -> PartitionCharges | None:
    """The budgets in a partition's commit ``metadata``; None if it holds none (no metadata, not
    a JSON object, someone else's, or written by a spout without a retry limit). Raises
    `MalformedCharges` saying what is wrong with metadata that has the budgets' keys malformed,
    or is longer than a spout writes."""
    if not metadata:
        return None
    if len(metadata.encode()) > METADATA_MAX_BYTES:
        raise MalformedCharges(f"{len(metadata.encode())} bytes, more than the {METADATA_MAX_BYTES} a spout writes")
    try:
        doc = json.loads(metadata)
    except (ValueError, RecursionError):
        return None   # not JSON: not ours (Storm's, a tool's, a person's note)
    if not isinstance(doc, dict) or not any(k in doc for k in _KEYS):
        return None
    emitted_to, charged, dead = doc.get("emittedTo"), doc.get("charged"), doc.get("dead")
    if type(emitted_to) is not int or emitted_to < 0:
        raise MalformedCharges(f"emittedTo {emitted_to!r} is not an offset")
    if not isinstance(charged, dict) or not isinstance(dead, dict):
        raise MalformedCharges("charged and dead must be objects of offset -> text")
    out = PartitionCharges(emitted_to)
    for key, text in charged.items():
        if not isinstance(text, str):
            raise MalformedCharges(f"charge {text!r} at offset {key!r} is not text")
        charge, _, tag = text.rpartition(" ")
        try:
            parsed = Charge.parse(charge)
        except ValueError:
            raise MalformedCharges(f"charge {text!r} at offset {key!r} is not \"<retries> <deaths> [<level> [<beside>]] <tag>\"") from None
        out.charged[_offset(key)] = TaggedCharge(parsed, _tag(tag))
    for key, tag in dead.items():
        out.dead[_offset(key)] = _tag(tag)
    return out


def charges_metadata(base: dict[str, Any], charges: PartitionCharges, committed: int) -> tuple[str, int]:
    """The commit metadata of a partition committed at ``committed``: ``base`` (``topologyId``,
    ``taskId``) and the budgets of the records at or past it, within `METADATA_MAX_BYTES`; and
    how many budgets (dead marks first, then the marks of a level alone, then the charges with
    the fewest deaths) did not fit."""
    charged = sorted(((o, c) for o, c in charges.charged.items() if o >= committed),
                     key=lambda oc: (-oc[1].charge.deaths, -oc[1].charge.retries, -oc[1].charge.level, oc[0]))
    dead = sorted((o, t) for o, t in charges.dead.items() if o >= committed)

    def text(n_charged: int, n_dead: int) -> str:
        doc = {**base, "emittedTo": charges.emitted_to,
               "charged": {str(o): f"{c.charge} {c.tag}" for o, c in sorted(charged[:n_charged])},
               "dead": {str(o): t for o, t in dead[:n_dead]}}
        return json.dumps(doc, separators=(",", ":"))

    # What each entry adds to the text (``"offset":"text"`` and its comma), so that the entries
    # that fit are counted in one pass: built again per entry dropped, the text cost a spout with
    # a few thousand dead marks waiting for a commit (malformed records behind one in flight)
    # minutes of next_tuple, one cubic commit after another.
    def sizes(entries: list[tuple[str, str]]) -> list[int]:
        return [len(json.dumps(k)) + 1 + len(json.dumps(v)) + 1 for k, v in entries]

    dead_sizes = sizes([(str(o), t) for o, t in dead])
    charged_sizes = sizes([(str(o), f"{c.charge} {c.tag}") for o, c in charged])
    n_charged, n_dead = len(charged), len(dead)
    # the text without a budget, plus the entries (an object's last entry has no comma)
    size = len(text(0, 0).encode()) + sum(dead_sizes) - (1 if dead else 0) + sum(charged_sizes) - (1 if charged else 0)
    while size > METADATA_MAX_BYTES and (n_charged or n_dead):
        if n_dead:   # dead marks first, the last (highest offset) first
            n_dead -= 1
            size -= dead_sizes[n_dead] - (1 if n_dead == 0 else 0)
        else:
            n_charged -= 1
            size -= charged_sizes[n_charged] - (1 if n_charged == 0 else 0)
    out = text(n_charged, n_dead)
    while len(out.encode()) > METADATA_MAX_BYTES and (n_charged or n_dead):   # (never: the sizes add up)
        if n_dead:
            n_dead -= 1
        else:
            n_charged -= 1
        out = text(n_charged, n_dead)
    return out, len(charged) - n_charged + len(dead) - n_dead
