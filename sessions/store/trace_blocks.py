"""Which blocks of a session's messages can hold a string, so Trace reads a few blocks of a million
messages, not all of them (issue 42, item 3).

Each whole block of BLOCK messages gets a bitset of the trigrams of letters and digits (36**3 of them, any
case) its text and tool calls hold; each whole run of SPAN blocks gets the union of theirs. A string is
looked for only in the blocks holding every trigram of its letters and digits, in the blocks not indexed
yet, and in the messages after the last whole block. A bitset holds every trigram the database could
match (the stored text as the database reads it, with the few other characters its case rules turn into
letters), so a block it rules out holds no match: the index only narrows, the database's own match
still decides. Messages never change once stored, so a block, once written, stays true.

Written by a task once appends fill a block (index_after_append), and by `index_session` for anything
stored otherwise; a block not written yet is read like the messages after the last one. Trigram indexes
of the databases (FTS5 `trigram`, `pg_trgm`) answer the same, per message: they doubled an append's
time (docs/performance.md), where this costs the append nothing and a bitset of 5,832 bytes (about 1 KB
compressed) each 256 messages."""

import logging
import zlib
from dataclasses import dataclass

from django.db import transaction
from django.db.models import TextField
from django.db.models.functions import Cast
from django_tasks import task

from sessions.models import Message, Session, TraceBlock

log = logging.getLogger(__name__)

BLOCK = 256  # messages a level-0 block holds
SPAN = 64  # level-0 blocks a level-1 block holds (16,384 messages)
ALPHABET = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
GRAMS = len(ALPHABET) ** 3
BITSET_BYTES = GRAMS // 8  # 46,656 bits
# Where more than this share of the blocks may hold a string, the session is read in order instead.
MOST_READ = 0.5
READ_CHUNK = 16  # blocks read from the messages at a time when indexing
READ_ROWS = 256  # messages fetched at a time (a message may be megabytes)

# Characters outside ASCII that a database's case rules can turn into ASCII letters: PostgreSQL's
# upper() (with ICU, ß to SS), RE2's (?i) folding (the Kelvin sign is a k, the long s an s).
FOLDED = {
    "ß": "SS", "ẞ": "SS", "ı": "I", "ſ": "S", "\u212a": "K", "ﬀ": "FF", "ﬁ": "FI", "ﬂ": "FL", "ﬃ": "FFI",
    "ﬄ": "FFL", "ﬅ": "ST", "ﬆ": "ST",
}
# Bytes: a-z to A-Z, 0-9 and A-Z kept, anything else (UTF-8's bytes of other characters too) a space.
_UPPER_ALNUM = bytes(
    c if c in ALPHABET else c - 32 if 97 <= c <= 122 else 32 for c in range(256)
)
_INDEX = {c: i for i, c in enumerate(ALPHABET)}


def _runs(text: str) -> set[bytes]:
    """The runs of letters and digits of `text`, upper-cased, as the database's case rules see them."""
    if not text:
        return set()
    if not text.isascii():
        for char, letters in FOLDED.items():  # twelve scans in C: faster than str.translate's per character
            if char in text:
                text = text.replace(char, letters)
    return set(text.encode("utf-8", "surrogatepass").translate(_UPPER_ALNUM).split())


def _gram_ids(runs) -> set[int]:
    ids = set()
    for run in runs:
        for i in range(len(run) - 2):
            ids.add(_INDEX[run[i]] * 1296 + _INDEX[run[i + 1]] * 36 + _INDEX[run[i + 2]])
    return ids


class Bitset:
    """The trigrams of a block's texts, added a text at a time (its distinct runs set aside first, so a
    word said a thousand times is split into trigrams once)."""

    def __init__(self):
        self.bits = bytearray(BITSET_BYTES)
        self.runs: set[bytes] = set()

    def add(self, text: str | None) -> None:
        self.runs |= _runs(text)
        if len(self.runs) > 50_000:
            self._flush()

    def _flush(self) -> None:
        for gram in _gram_ids(self.runs):
            self.bits[gram >> 3] |= 1 << (gram & 7)
        self.runs.clear()

    def compressed(self) -> bytes:
        self._flush()
        return zlib.compress(bytes(self.bits), 1)


def union(blobs) -> bytes:
    total = 0
    for blob in blobs:
        total |= int.from_bytes(zlib.decompress(blob), "little")
    return zlib.compress(total.to_bytes(BITSET_BYTES, "little"), 1)


def query_grams(words) -> list[int]:
    """The trigrams every match of these words holds: those of each run of ASCII letters and digits in
    them (the only characters every database spells the same in text and in JSON)."""
    runs = set()
    for word in words:
        runs |= set(word.encode("ascii", "replace").replace(b"?", b" ").translate(_UPPER_ALNUM).split())
    return sorted(_gram_ids(runs))


def _holds(blob: bytes, grams: list[int]) -> bool:
    bits = zlib.decompress(blob)
    return all(bits[gram >> 3] >> (gram & 7) & 1 for gram in grams)


@dataclass
class Scan:
    """Where to look for a string: `ranges` of seqs (inclusive, in order), or everywhere when it is None."""

    ranges: list[tuple[int, int]] | None
    blocks_read: int = 0  # level-0 and level-1 bitsets read

    def seqs(self, at_once: int):
        """The seqs of the ranges, in order, `at_once` at a time."""
        batch = []
        for first, last in self.ranges or ():
            for seq in range(first, last + 1):
                batch.append(seq)
                if len(batch) == at_once:
                    yield batch
                    batch = []
        if batch:
            yield batch


def scan_ranges(session: Session, grams: list[int]) -> Scan:
    """The seqs of `session` that can hold a string with these trigrams."""
    whole = session.message_count // BLOCK
    if not grams or whole == 0:
        return Scan(None)
    rows = TraceBlock.objects.filter(session_id=session.pk)
    spans = dict(rows.filter(level=1).values_list("number", "grams"))
    ruled_out = {number for number, blob in spans.items() if not _holds(blob, grams)}
    wanted = [span for span in range((whole - 1) // SPAN + 1) if span not in ruled_out]
    blocks = {}
    for first, last in _merged(wanted):
        blocks.update(rows.filter(level=0, number__range=(first * SPAN, last * SPAN + SPAN - 1))
                      .values_list("number", "grams"))
    read = []
    for span in wanted:
        for number in range(span * SPAN, min((span + 1) * SPAN, whole)):
            blob = blocks.get(number)
            if blob is None or _holds(blob, grams):
                read.append(number)
    if len(read) > whole * MOST_READ:  # a string of common trigrams: read in order, its first matches come soon
        return Scan(None, len(spans) + len(blocks))
    ranges = [(first * BLOCK + 1, last * BLOCK + BLOCK) for first, last in _merged(read)]
    if whole * BLOCK < session.message_count:
        if ranges and ranges[-1][1] == whole * BLOCK:
            ranges[-1] = (ranges[-1][0], session.message_count)
        else:
            ranges.append((whole * BLOCK + 1, session.message_count))
    return Scan(ranges, len(spans) + len(blocks))


def _merged(numbers) -> list[tuple[int, int]]:
    """Sorted numbers as runs of consecutive ones, (first, last)."""
    runs: list[tuple[int, int]] = []
    for number in sorted(numbers):
        if runs and runs[-1][1] == number - 1:
            runs[-1] = (runs[-1][0], number)
        else:
            runs.append((number, number))
    return runs


def index_session(session_id: int) -> int:
    """Write the bitsets of every whole block of the session not written yet, then of every whole span.
    Safe to run twice at once (a block written by the other is kept). Returns how many were written."""
    count = Session.objects.filter(pk=session_id).values_list("message_count", flat=True).first()
    if not count:
        return 0
    whole = count // BLOCK
    rows = TraceBlock.objects.filter(session_id=session_id)
    have = set(rows.filter(level=0).values_list("number", flat=True))
    missing = [number for number in range(whole) if number not in have]
    written = 0
    for at in range(0, len(missing), READ_CHUNK):
        chunk = missing[at:at + READ_CHUNK]
        written += _write_blocks(session_id, chunk)
    spans_have = set(rows.filter(level=1).values_list("number", flat=True))
    for span in range(whole // SPAN):
        if span in spans_have:
            continue
        blobs = list(rows.filter(level=0, number__range=(span * SPAN, span * SPAN + SPAN - 1))
                     .values_list("grams", flat=True))
        if len(blobs) == SPAN:
            TraceBlock.objects.bulk_create([TraceBlock(session_id=session_id, level=1, number=span, grams=union(blobs))],
                                           ignore_conflicts=True)
            written += 1
    return written


def _write_blocks(session_id: int, numbers: list[int]) -> int:
    bitsets = {number: Bitset() for number in numbers}
    for first, last in _merged(numbers):
        rows = (Message.objects.filter(session_id=session_id, seq__range=(first * BLOCK + 1, last * BLOCK + BLOCK))
                .annotate(calls_text=Cast("tool_calls", TextField()))
                .values_list("seq", "text", "calls_text"))
        for seq, text, calls in rows.iterator(chunk_size=READ_ROWS):
            bits = bitsets[(seq - 1) // BLOCK]
            bits.add(text)
            bits.add(calls)
    blocks = [TraceBlock(session_id=session_id, level=0, number=number, grams=bits.compressed())
              for number, bits in bitsets.items()]
    TraceBlock.objects.bulk_create(blocks, ignore_conflicts=True)
    return len(blocks)


@task()
def index_trace_blocks(session_id: int) -> int:
    return index_session(session_id)


def index_after_append(session_id: int, first_seq: int, last_seq: int) -> None:
    """After an append stored `first_seq` to `last_seq`: when it filled a block, the task that indexes
    it, once the append commits. The index only narrows Trace's reading, so an enqueue that fails is
    logged, never the append's error."""
    if last_seq // BLOCK == (first_seq - 1) // BLOCK:
        return

    def enqueue():
        try:
            index_trace_blocks.enqueue(session_id)
        except Exception:  # the queue is down: Trace reads the blocks not indexed, as it does before a worker runs
            log.exception("could not enqueue the trace index of session %s", session_id)

    transaction.on_commit(enqueue)
