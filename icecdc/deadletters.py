"""Dead letters: documents that can never be written, kept with the reason, never dropped silently.

OpenSearch refuses some documents for good, for a mapping conflict or a size too large, and some
rows cannot become documents, such as a row with a null identifier. They go to a dead-letter
location, a local directory or `s3://bucket/prefix/` in AWS, as JSON lines. Each executor task that
had any writes one file, and the batch completes. `icecdc status` counts them. The count is in each
file's name, `…-n<count>.jsonl`, so counting lists names and reads no file.

A letter is kept after it is dealt with. `icecdc dead-letters replay` (icecdc.replay) marks it
replayed, or keeps it with the new reason when its document is refused again. `mark-replayed` marks
letters an operator dealt with otherwise. A file is never changed in place: its next revision,
`…-r<revision>-n<count>.jsonl` with the count of letters not dealt with, is written, then the older
ones are deleted. Readers take the highest revision, so a crash in between counts nothing twice.
A table's files are in its folder, its name made one folder name (`storage.name_part`): every
letter's path is inside the location, whatever the table's namespace holds.

There is one open letter per row and cause (`DeadLetter.key`). A row read again
whose letter is still open is not lettered again; a copy-on-write rewrite of its
file, a replay or a repair may read it again.
"""

from __future__ import annotations

import calendar
import dataclasses
import hashlib
import json
import re
import time
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from icecdc.errors import OperationError
from icecdc.storage import Location, is_name_part, name_part, text_of

# `<UTC time>Z-<key>[-r<revision>]-n<count>.jsonl`; names written before
# revisions have a local time and no Z.
_NAME = re.compile(
    r"^(?P<stamp>\d{8}T\d{6})(?P<utc>Z?)-(?P<key>[0-9a-f]{12})"
    r"(?:-r(?P<revision>\d+))?-n(?P<count>\d+)\.jsonl$"
)
_STAMP = "%Y%m%dT%H%M%S"
# The cause of the letters of rows that share an identifier (`engines.target.Target.duplicates`).
SHARED_ID_CAUSE = "several live rows share an identifier"


def shared_id_cause(columns: Iterable[str]) -> str:
    """The cause of the letters of rows that share an identifier of these columns."""
    return f"{SHARED_ID_CAUSE}; {unique_columns_rule(columns)}"


def unique_columns_rule(columns: Iterable[str]) -> str:
    """What rows that share an identifier of these columns break, as a reason's last clause."""
    return f"the identifier columns ({', '.join(columns)}) must be unique"


@dataclass(frozen=True)
class DeadLetter:
    table: str
    snapshot_id: int | None
    sequence_number: int
    doc_id: str | None
    # OpenSearch's HTTP status for the item; None when the row never became a document
    status: int | None
    reason: str  # the latest refusal: a replay that is refused again replaces it
    document: str | None  # the document's JSON text (None for a delete)
    replayed_at: float | None = None
    # what dealing with it did: "indexed the checkpoint's row", "deleted: the row is gone",
    # an operator's note
    outcome: str = ""
    attempts: int = 0  # replays that found the document refused again
    cause: str = ""  # the reason without the row's own details: what letters are grouped by

    @property
    def kind(self) -> str:
        """What the letter is counted under: its cause; its reason, for a letter without one."""
        return self.cause or self.reason

    @property
    def sample(self) -> str:
        return letter_sample(self.doc_id, self.reason, self.document)

    @property
    def key(self) -> str:
        """Which row and cause the letter is of.

        A document OpenSearch refused is known by its id; a row that never became a document (a null
        identifier, a key two rows share) by its id, if any, and its values: a rewrite moves it to
        another file and position, not to other values. The reason counts by its cause, which
        names no file: a change and an export word the reason of one row otherwise. A letter
        without a cause counts by its reason without what a rewrite changes (paths, snapshot and
        sequence numbers)."""
        row = [self.doc_id] if self.status is not None else [self.doc_id, self.document]
        identity = [self.table, row, self.cause or _cause(self.reason)]
        return hashlib.sha256(json.dumps(identity).encode()).hexdigest()


# How much of a document a sample quotes.
SAMPLE_CHARS = 200


def letter_sample(doc_id: str | None, reason: str, document: str | None) -> str:
    """One line naming a dead-lettered row: its `_id`, the reason, the start of its document."""
    cut = "" if document is None or len(document) <= SAMPLE_CHARS else "…"
    quoted = "" if document is None else f"; document {document[:SAMPLE_CHARS]}{cut}"
    named = f"_id {doc_id!r}: " if doc_id is not None else ""
    return f"{named}{reason}{quoted}".replace("\n", " ")


@dataclass
class LetterTally:
    """Dead letters counted by cause (`DeadLetter.kind`), each cause with one letter's sample.

    A pass hands it back from where its letters were written, to report and judge the pass by.
    """

    counts: dict[str, int] = field(default_factory=dict)
    samples: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, letters: Iterable[DeadLetter]) -> LetterTally:
        tally = cls()
        for letter in letters:
            tally.count(letter.kind, letter.sample)
        return tally

    def count(self, cause: str, sample: str, n: int = 1) -> None:
        self.counts[cause] = self.counts.get(cause, 0) + n
        self.samples.setdefault(cause, sample)

    def add(self, other: LetterTally) -> LetterTally:
        for cause, n in other.counts.items():
            self.count(cause, other.samples.get(cause, ""), n)
        return self

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def __bool__(self) -> bool:
        return bool(self.counts)

    def by_cause(self) -> list[tuple[str, int]]:
        """(cause, count), the most frequent first."""
        return sorted(self.counts.items(), key=lambda item: (-item[1], item[0]))

    def summary(self, samples: bool = False, causes: int | None = None) -> str:
        """`count cause` of each cause, most frequent first.

        Only the `causes` most frequent, when given; with a sample of each when `samples`.
        """
        shown = self.by_cause()[:causes]
        sample = {cause: f" (e.g. {self.samples[cause]})" if samples else "" for cause, _ in shown}
        parts = [f"{n} {cause}{sample[cause]}" for cause, n in shown]
        if len(shown) < len(self.counts):
            parts.append(f"and {len(self.counts) - len(shown)} more causes")
        return "; ".join(parts)


def systemic(letters: LetterTally, rows: int, max_share: float, min_count: int) -> bool:
    """Whether a pass's dead letters show a cause shared by many rows rather than rows' own faults.

    That takes at least `min_count` letters, and more than `max_share` of the pass's
    `rows`, every row refused for one reason among them. `rows` includes the rows
    dead-lettered. See docs/dead-letters.md.
    """
    total = letters.total
    return total >= min_count and total > max_share * max(rows, total)


@dataclass(frozen=True)
class StoredLetter:
    """A dead letter where it is kept."""

    # `<table's folder>/<file>:<line>`: names the letter across the revisions of its file; the
    # folder is the table's name, `/`, `%` and a leading `.` escaped (`storage.name_part`)
    letter_id: str
    written_at: float  # when its file was first written, in seconds since the epoch
    letter: DeadLetter


@dataclass(frozen=True)
class Selection:
    """Which letters an operator means; an unset criterion keeps every letter.

    Letters written in [since, until), in seconds since the epoch, whose reason
    contains `reason` in any case, of these ids.
    """

    since: float | None = None
    until: float | None = None
    reason: str | None = None
    letter_ids: frozenset[str] = frozenset()

    def __call__(self, stored: StoredLetter) -> bool:
        return (
            (self.since is None or stored.written_at >= self.since)
            and (self.until is None or stored.written_at < self.until)
            and (self.reason is None or self.reason.lower() in stored.letter.reason.lower())
            and (not self.letter_ids or stored.letter_id in self.letter_ids)
        )


@dataclass(frozen=True)
class _File:
    """The highest revision of one letter file."""

    table: str
    stem: str  # `<time>-<key>`: the file across its revisions
    revision: int
    count: int  # its letters not dealt with
    name: str
    written_at: float
    # names of lower revisions not deleted yet (a crash between write and delete)
    older: tuple[str, ...]


class DeadLetters:
    """Writes, counts, reads and marks dead letters.

    They are kept at a local directory or an `s3://bucket/prefix` location.
    """

    def __init__(self, location: str) -> None:
        self.location = location.rstrip("/")
        self._storage = Location(location)

    def write(self, letters: Iterable[DeadLetter]) -> int:
        """Store the letters, one file per table, and return how many were stored.

        A letter is not stored when its row and cause
        (`DeadLetter.key`) have an open letter already.
        """
        by_table: dict[str, dict[str, DeadLetter]] = {}
        for letter in letters:
            by_table.setdefault(letter.table, {}).setdefault(letter.key, letter)
        for table, keyed in list(by_table.items()):
            held = self.open_keys(table)
            by_table[table] = {k: letter for k, letter in keyed.items() if k not in held}
        for table, new in by_table.items():
            batch = list(new.values())
            if not batch:
                continue
            stem = f"{time.strftime(_STAMP, time.gmtime())}Z-{uuid.uuid4().hex[:12]}"
            self._storage.put(f"{name_part(table)}/{stem}-n{len(batch)}.jsonl", _body(batch))
        return sum(len(batch) for batch in by_table.values())

    def open_keys(self, table_name: str) -> set[str]:
        """The keys (`DeadLetter.key`) of the table's letters not dealt with; reads their files."""
        return (
            {stored.letter.key for stored in self.letters(table_name)}
            if self.count(table_name)
            else set()
        )

    def shared_rows(self, table_name: str) -> dict[str, int]:
        """The ids of the table's open letters for rows that share an identifier, and their rows.

        The index holds no document of these ids until a replay finds one live row of each. An id's
        count is of the rows its letters name: at least its live rows, as every live row of it has
        a letter, and more where a row lettered was deleted or changed since. Reads the letter
        files only when the table has open letters.
        """
        if not self.count(table_name):
            return {}
        rows: dict[str, set[str | None]] = {}
        for stored in self.letters(table_name):
            letter = stored.letter
            if letter.doc_id is not None and letter.cause.startswith(SHARED_ID_CAUSE):
                rows.setdefault(letter.doc_id, set()).add(letter.document)
        return {doc_id: len(documents) for doc_id, documents in rows.items()}

    def count(self, table_name: str) -> int:
        """The table's letters not dealt with, from the files' names alone."""
        return sum(f.count for f in self._files(table_name))

    def read(self, table_name: str) -> list[dict[str, Any]]:
        """Every dead letter of a table not dealt with, as JSON objects, for operators and tests."""
        return [asdict(stored.letter) for stored in self.letters(table_name)]

    def letters(self, table_name: str, include_replayed: bool = False) -> list[StoredLetter]:
        """The table's letters, oldest file first; those dealt with only when `include_replayed`."""
        found = [stored for f in self._files(table_name) for stored in self._read_file(f)]
        return [s for s in found if include_replayed or s.letter.replayed_at is None]

    def get(self, letter_ids: Iterable[str]) -> list[StoredLetter]:
        """The letters of these ids; OperationError naming the first id that names no letter."""
        wanted = list(dict.fromkeys(letter_ids))
        found: dict[str, StoredLetter] = {}
        for table in dict.fromkeys(_parse_id(i)[0] for i in wanted):
            found |= {s.letter_id: s for s in self.letters(table, include_replayed=True)}
        unknown = [i for i in wanted if i not in found]
        if unknown:
            raise OperationError(
                f"no dead letter {unknown[0]!r} at {self.location} (`icecdc dead-letters "
                "list` names them)"
            )
        return [found[i] for i in wanted]

    def update(self, changed: Iterable[StoredLetter]) -> None:
        """Store these letters as they now are, in place of their earlier state.

        Each file they are in gets its next revision, with the others' letters as they were; then
        its older revisions are deleted.
        """
        by_table: dict[str, dict[str, dict[int, DeadLetter]]] = {}
        for stored in changed:
            table, stem, line = _parse_id(stored.letter_id)
            by_table.setdefault(table, {}).setdefault(stem, {})[line] = stored.letter
        revised: list[tuple[_File, dict[int, DeadLetter]]] = []
        for table, by_stem in by_table.items():
            files = {f.stem: f for f in self._files(table)}
            gone = [stem for stem in by_stem if stem not in files]
            if gone:
                raise OperationError(
                    f"dead-letter file {table}/{gone[0]} is gone from {self.location}; "
                    "nothing was marked"
                )
            revised += [(files[stem], lines) for stem, lines in by_stem.items()]
        for current, lines in revised:
            letters = [
                lines.get(_parse_id(s.letter_id)[2], s.letter) for s in self._read_file(current)
            ]
            pending = sum(letter.replayed_at is None for letter in letters)
            self._storage.put(
                f"{name_part(current.table)}/{current.stem}-r{current.revision + 1}"
                f"-n{pending}.jsonl",
                _body(letters),
            )
            for name in (current.name, *current.older):
                self._storage.delete(name)

    def mark_replayed(self, letter_ids: Iterable[str], note: str) -> list[StoredLetter]:
        """Mark letters an operator dealt with otherwise as replayed, with `note` as their outcome.

        Letters marked already stay as they were. Return the letters as they now are.
        """
        now = time.time()
        marked = [
            s
            if s.letter.replayed_at is not None
            else replace(s, letter=replace(s.letter, replayed_at=now, outcome=note))
            for s in self.get(letter_ids)
        ]
        self.update(s for s in marked if s.letter.replayed_at == now)
        return marked

    def _files(self, table_name: str) -> list[_File]:
        """The highest revision of each of the table's letter files, oldest first."""
        revisions: dict[str, list[tuple[int, int, str, re.Match[str]]]] = {}
        for name in self._storage.names(name_part(table_name)):
            match = _NAME.match(name.rpartition("/")[2])
            if match:
                stem = f"{match['stamp']}{match['utc']}-{match['key']}"
                revisions.setdefault(stem, []).append(
                    (int(match["revision"] or 0), int(match["count"]), name, match)
                )
        files = []
        for stem, found in sorted(revisions.items()):
            found.sort()
            revision, count, name, match = found[-1]
            moment = time.strptime(match["stamp"], _STAMP)
            written_at = float(calendar.timegm(moment) if match["utc"] else time.mktime(moment))
            files.append(
                _File(
                    table_name,
                    stem,
                    revision,
                    count,
                    name,
                    written_at,
                    tuple(n for _, _, n, _ in found[:-1]),
                )
            )
        return files

    def _read_file(self, f: _File) -> list[StoredLetter]:
        text = self._storage.get(f.name) or ""
        folder = name_part(f.table)
        return [
            StoredLetter(f"{folder}/{f.stem}:{line}", f.written_at, _letter(json.loads(text_line)))
            for line, text_line in enumerate((t for t in text.splitlines() if t.strip()), start=1)
        ]


_FIELDS = {f.name for f in dataclasses.fields(DeadLetter)}
# What a rewrite or an update changes in a reason: paths, numbers, OpenSearch's preview of a value.
_VOLATILE = re.compile(r"Preview of field's value: '.*?'|\S*/\S*|\d+")


def _cause(reason: str) -> str:
    """The reason without what changes when the same row is refused again for the same cause."""
    return _VOLATILE.sub("#", reason)


def _letter(raw: dict[str, Any]) -> DeadLetter:
    # Keys a later version may add are left out, so that letters it wrote still read.
    return DeadLetter(**{k: v for k, v in raw.items() if k in _FIELDS})


def _body(letters: Iterable[DeadLetter]) -> str:
    return "".join(json.dumps(asdict(letter), sort_keys=True) + "\n" for letter in letters)


def _parse_id(letter_id: str) -> tuple[str, str, int]:
    """Table, file stem and line of `<table's folder>/<stem>:<line>`.

    OperationError names it when it is not one, or when its folder is not one folder inside the
    location: nothing outside it is read or written.
    """
    path, _, line = letter_id.rpartition(":")
    folder, _, stem = path.rpartition("/")
    if not (folder and stem and line.isdigit() and _NAME.match(f"{stem}-n0.jsonl")):
        raise OperationError(
            f"{letter_id!r} is not a dead letter's id (`<table>/<file>:<line>`, as `icecdc "
            "dead-letters list` prints)"
        )
    if not is_name_part(folder):
        raise OperationError(
            f"{letter_id!r} is not a dead letter's id: {folder!r} is not one folder inside the "
            "dead-letter location, and nothing outside it is read (ids are as `icecdc "
            "dead-letters list` prints them)"
        )
    return text_of(folder), stem, int(line)
