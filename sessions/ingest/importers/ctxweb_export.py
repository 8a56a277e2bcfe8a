"""ctxweb's own export (sessions.context.exports): the JSON document or its JSON Lines form. The messages are
appended as they were exported (their ids make a second import store nothing), the session's title,
metadata, instructions and compaction settings are set, and the checkpoints are recreated at the
same places, so the round trip of the transcript is lossless. The tags, notes and reviews an export
carries are people's annotations on the server it came from (a note's author may not exist here): they
are read past, not restored."""

from sessions.context.exports import EXPORT_FORMAT
from sessions.wire.parsed import (
    ImportedCheckpoint,
    ImportedSession,
    Parsed,
    Source,
    TranscriptError,
)

FORMAT = "ctxweb"


def looks_like(value) -> bool:
    if isinstance(value, dict):
        return value.get("format") == EXPORT_FORMAT
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return value[0].get("type") == "session" and value[0].get("format") == EXPORT_FORMAT
    return False


def _from_lines(lines: list) -> dict:
    document = {"session": None, "messages": [], "checkpoints": []}
    for number, line in enumerate(lines, start=1):
        if not isinstance(line, dict):
            raise TranscriptError(f"line {number}: an entry must be a JSON object")
        kind = line.get("type")
        body = {k: v for k, v in line.items() if k != "type"}
        if kind == "session":
            document["session"] = {k: v for k, v in body.items() if k not in ("format", "version")}
        elif kind == "message":
            seq = body.pop("seq", None)
            if seq is not None and (type(seq) is not int or seq != len(document["messages"]) + 1):
                raise TranscriptError(f"line {number}: messages must come in seq order without gaps")
            document["messages"].append(body)
        elif kind == "checkpoint":
            document["checkpoints"].append(body)
        elif kind in ("note", "review"):
            continue
        else:
            raise TranscriptError(f"line {number}: unknown entry type {kind!r}")
    return document


def parse(value, source: Source) -> Parsed:
    document = _from_lines(value) if isinstance(value, list) else value
    session = document.get("session")
    messages = document.get("messages")
    if not isinstance(session, dict) or not isinstance(session.get("key"), str):
        raise TranscriptError("a ctxweb export needs a session object with a key")
    if not isinstance(messages, list):
        raise TranscriptError("a ctxweb export needs a messages list")
    try:
        ordered = sorted(document.get("checkpoints") or [], key=_order)
    except TypeError:
        raise TranscriptError("checkpoints need whole-number last_seq and created_at_seq") from None
    checkpoints = []
    for number, checkpoint in enumerate(ordered, start=1):
        try:
            checkpoints.append(ImportedCheckpoint(
                last=_whole(checkpoint["last_seq"]),
                at=_whole(checkpoint.get("created_at_seq") or checkpoint["last_seq"]),
                summary=checkpoint["summary"],
                summarizer=checkpoint.get("summarizer") or "import",
                trigger=checkpoint.get("trigger") or "import",
                created_at=checkpoint.get("created_at"),
            ))
        except (KeyError, TypeError, ValueError):
            raise TranscriptError(f"checkpoint {number} needs last_seq, created_at_seq and summary") from None
    key = source.key_prefix + session["key"] if source.key_prefix else session["key"]
    return Parsed(FORMAT, [ImportedSession(
        key=key,
        messages=messages,
        title=session.get("title"),
        metadata=session.get("metadata"),
        instructions=session.get("instructions"),
        compaction=session.get("compaction") or None,
        created_at=session.get("created_at"),
        checkpoints=checkpoints,
    )])


def _whole(value) -> int:
    """A seq as exported: a JSON whole number, not a boolean, a float or a string of digits."""
    if type(value) is not int:
        raise TypeError(value)
    return value


def _order(checkpoint):
    if not isinstance(checkpoint, dict):
        raise TranscriptError("each checkpoint must be an object")
    return (checkpoint.get("created_at_seq") or 0, checkpoint.get("last_seq") or 0)
