"""Every JSON reader of a file refuses nesting past CTXWEB_MAX_JSON_DEPTH + 8 before it parses (security
issue 37, item 11): a 6 MB file of "[" used to take the task worker to 16.5 GB (ijson builds, for each
event, a path as long as the nesting), and json.loads recurses into it. The file fails with a sentence
naming the limit, stores nothing, and costs memory of about its own size at most."""

import io
import json
import time
import tracemalloc
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from hypothesis import given, settings
from hypothesis import strategies as st

from sessions.ingest.importers import import_file
from sessions.models import Message, Session
from sessions.wire.json_body import Nesting, nested_too_deep

pytestmark = pytest.mark.django_db

MiB = 1024 * 1024
SENTENCE = "nested more than 40 levels deep (CTXWEB_MAX_JSON_DEPTH + 8)"
DATA = Path(__file__).resolve().parent.parent / "data"
CHAT = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]

HOSTILE = {
    "brackets": b"[" * (6 * MiB),
    "objects": b'{"a":' * (6 * MiB // 5),
    "closed brackets": b"[" * (3 * MiB) + b"]" * (3 * MiB),
    "a message list, then brackets": b'[{"role": "user", "content": "Hi"}, ' + b"[" * (6 * MiB),
}


def json_depth(value) -> int:
    if isinstance(value, dict):
        return 1 + max(map(json_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(json_depth, value), default=0)
    return 0


def measured(work):
    """What `work()` returns, its peak of traced memory in bytes, and its seconds."""
    tracemalloc.start()
    started = time.perf_counter()
    try:
        result = work()
        return result, tracemalloc.get_traced_memory()[1], time.perf_counter() - started
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("name", ["brackets.json", "brackets.jsonl"])
@pytest.mark.parametrize("shape", HOSTILE)
def test_a_6_mb_file_nested_past_the_limit_fails_with_the_sentence_in_bounded_memory(import_bytes, shape, name):
    """Read whole (runner.import_data): the file itself is 6 MB, what the import adds stays under 50 MB."""
    report, peak, seconds = measured(lambda: import_bytes(name, HOSTILE[shape]))

    assert SENTENCE in report.error, report.error
    assert peak < 50 * MiB, peak
    assert seconds < 5, seconds
    assert not Session.objects.exists()


@pytest.mark.parametrize("name", ["brackets.json", "brackets.jsonl"])
@pytest.mark.parametrize("shape", HOSTILE)
def test_a_6_mb_file_nested_past_the_limit_fails_through_import_transcripts(project, tmp_path, shape, name):
    """Streamed from disk (over CTXWEB_IMPORT_STREAM_ABOVE): refused in its first megabyte."""
    path = tmp_path / name
    path.write_bytes(HOSTILE[shape])
    err = io.StringIO()

    def run():
        with pytest.raises(CommandError, match="1 of 1 file"):
            call_command("import_transcripts", str(path), stdout=io.StringIO(), stderr=err)

    _, peak, seconds = measured(run)

    assert SENTENCE in err.getvalue(), err.getvalue()
    assert peak < 50 * MiB, peak
    assert seconds < 5, seconds
    assert not Session.objects.exists()


def test_a_deep_line_of_json_lines_fails_and_stores_nothing(import_bytes):
    lines = [json.dumps(message) for message in CHAT] + ["[" * 50_000 + "]" * 50_000]

    report = import_bytes("chat.jsonl", "\n".join(lines))

    assert SENTENCE in report.error
    assert not Message.objects.exists()


def test_a_request_log_with_a_deep_record_fails_and_stores_nothing(import_bytes):
    record = {"request": {"model": "m", "messages": CHAT[:1]}, "response": {"choices": [{"message": CHAT[1]}]}}
    deep = json.dumps(record)[:-1] + ', "extra": ' + "[" * 50_000 + "]" * 50_000 + "}"

    report = import_bytes("requests.jsonl", json.dumps(record) + "\n" + deep, fmt="request-log")

    assert SENTENCE in report.error
    assert not Session.objects.exists()


@pytest.mark.parametrize("size", [10_000, 600_000], ids=["read whole", "streamed"])
def test_brackets_inside_strings_do_not_count(project, tmp_path, size):
    """Two messages of `size` characters: the file is over 1 MB (CTXWEB_IMPORT_STREAM_ABOVE) when streamed."""
    text = '[{"' * (size // 3)
    path = tmp_path / "brackets-in-text.json"
    path.write_text(json.dumps([{"role": "user", "content": text}, {"role": "assistant", "content": text}]))

    report = import_file(project, path)

    assert report.error is None, report.error
    assert Message.objects.filter(content=text).exists()


def test_a_file_at_the_limit_is_read(import_bytes):
    """40 levels: a message list (1), a message (2), its attributes (3) holding 37 levels of lists."""
    message = {"role": "user", "content": "deep", "attributes": {"a": json.loads("[" * 37 + "]" * 37)}}
    assert json_depth([message]) == 40

    report = import_bytes("deep.json", [message, CHAT[1]])

    assert SENTENCE not in (report.error or "")


@pytest.mark.parametrize("path", sorted(p for p in DATA.rglob("*") if p.suffix in (".json", ".jsonl", ".traj")),
                         ids=lambda p: p.name)
def test_every_real_file_is_far_within_the_limit(path):
    """The deepest real file in tests/data nests 11 levels."""
    assert not nested_too_deep(path.read_bytes(), 11)


# --- the depth check itself -----------------------------------------------------------------------

TRICKY = st.sampled_from(["[", "]", "{", "}", '"', "\\", "a", "\u00e9", "\u2603"])
KEYS = st.text(TRICKY, max_size=4)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(TRICKY, max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(value=JSON, piece=st.integers(1, 9), as_text=st.booleans())
def test_the_check_agrees_with_the_parsed_depth_whatever_the_pieces(value, piece, as_text):
    text = json.dumps(value, ensure_ascii=not as_text)
    data = text if as_text else text.encode()
    depth = json_depth(value)
    for limit in {max(depth - 1, 1), depth}:
        whole = Nesting(limit).over(data)
        pieces = Nesting(limit)
        in_pieces = any([pieces.over(data[i:i + piece]) for i in range(0, len(data), piece)])
        assert whole == in_pieces == (depth > limit), (text, limit)


@pytest.mark.parametrize("text", [
    b"[" + b"[[]]," * (2 * MiB) + b"[]]",  # the most tokens per byte at a depth the check cannot skip whole
    b'["' + b'\\"' * (5 * MiB) + b'"]',
    b'["' + b'\\"' * (5 * MiB),  # a string that never ends, full of escaped quotes
    json.dumps(["a"] * (2 * MiB)).encode(),
])
def test_the_check_is_linear_in_the_text(text):
    """10 MB (the API's request limit) of the shapes that cost the check the most, in seconds of CPU (other
    processes on a loaded machine do not count: 5.5 s of wall time there); it builds nothing (memory is
    measured on a tenth of the text: tracemalloc slows each match tenfold)."""
    started = time.process_time()
    assert not nested_too_deep(text)
    seconds = time.process_time() - started
    tenth = text[:len(text) // 10]
    _, peak, _ = measured(lambda: nested_too_deep(tenth))

    assert seconds < 5, seconds
    assert peak < 100_000, peak
