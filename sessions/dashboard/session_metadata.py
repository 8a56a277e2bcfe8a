"""What the session page shows beside the messages, quietly: the session's metadata, where an import
came from, the parent and sub-agent sessions it is linked to; and how much of a message's attributes
and long text is shown before the reader asks for the rest."""

import json
from dataclasses import dataclass

from django.db.models import Q

from sessions.models import Message, Session

# Metadata keys the panel shows in sections of their own rather than in its table.
IMPORT_KEY = "imported_from"
LINK_KEYS = ("parent_session", "sidechains", "sidechain", "parent_tool_call_id", "thread_of", "threads")
# A metadata value longer than this, as text or JSON, is folded behind its first characters.
VALUE_SHOWN = 160
# An object in the metadata is listed key by key, at most this deep and in at most this many rows.
NESTED_DEPTH = 3
NESTED_ROWS = 12

# Attributes a source application writes for its own bookkeeping: ids linking its lines, where and by
# which version it ran, the raw API envelope, a structured copy of a tool's result. Real files:
# Claude Code (uuid, parentUuid, sessionId, cwd, version, gitBranch, userType, requestId, isSidechain,
# message, toolUseResult), mini-swe-agent (extra: the raw response; provider_specific_fields), the
# OpenAI chat shape (function_call: null, index), SWE-agent (message_type).
BOOKKEEPING_ATTRIBUTES = frozenset({
    "uuid", "parentUuid", "leafUuid", "logicalParentUuid", "merged_uuids", "sessionId", "cwd", "version",
    "gitBranch", "userType", "requestId", "isSidechain", "timestamp", "message", "toolUseResult",
    "extra", "provider_specific_fields", "function_call", "index", "message_type",
})

# A text is folded to a preview when it is longer than FOLD_CHARS characters, or when its message holds
# more than FOLD_TOKENS tokens and the text is longer than the preview.
FOLD_CHARS = 1_500
FOLD_TOKENS = 400
PREVIEW_CHARS = 600


@dataclass(frozen=True)
class MetadataItem:
    key: str
    value: object
    is_text: bool
    shown: str  # the value as text (JSON when it is not text)
    preview: str  # the value on one line (compact JSON when it is not text)
    folded: bool  # longer than VALUE_SHOWN: shown behind <details>


@dataclass(frozen=True)
class Folded:
    head: str
    rest: str


def _item(key: str, value) -> MetadataItem:
    is_text = isinstance(value, str)
    shown = value if is_text else json.dumps(value, indent=2, ensure_ascii=False, default=str)
    preview = value if is_text else json.dumps(value, ensure_ascii=False, default=str)
    return MetadataItem(key, value, is_text, shown, preview, len(shown) > VALUE_SHOWN)


def _leaves(path: str, value, depth: int) -> list[tuple[str, object]]:
    """A nested object's values under dotted paths (the list's `column=info.task.user_id`), down to
    NESTED_DEPTH keys; lists and deeper objects stay whole."""
    if not isinstance(value, dict) or not value or depth >= NESTED_DEPTH:
        return [(path, value)]
    return [leaf for key, inner in value.items() for leaf in _leaves(f"{path}.{key}", inner, depth + 1)]


def metadata_items(metadata: dict) -> list[MetadataItem]:
    """The metadata the panel lists in its table, in stored order. An object is listed key by key (a
    benchmark's `info.task.instruction` shows as text) unless that makes more than NESTED_ROWS rows."""
    items = []
    for key, value in (metadata or {}).items():
        if key == IMPORT_KEY or key in LINK_KEYS:
            continue
        leaves = _leaves(key, value, 1)
        if len(leaves) > NESTED_ROWS:
            leaves = [(key, value)]
        items += [_item(path, inner) for path, inner in leaves]
    return items


def imported_from(session: Session) -> dict | None:
    """How the session was imported: its file, format and record, or None for an application's session."""
    origin = (session.metadata or {}).get(IMPORT_KEY)
    if not session.import_source and not isinstance(origin, dict):
        return None
    origin = origin if isinstance(origin, dict) else {}
    return {"file": origin.get("file") or session.import_source, "format": origin.get("format", ""),
            "record": origin.get("record"), "source": session.import_source,
            "still_importing": session.being_imported}


def relatives(session: Session) -> dict:
    """The session's parent and sub-agent sessions in its project, found with one query: those its
    metadata names (`parent_session`, `sidechains`) and those naming it as their parent."""
    metadata = session.metadata or {}
    parent_key = metadata.get("parent_session") if isinstance(metadata.get("parent_session"), str) else None
    listed = [k for k in metadata.get("sidechains") or () if isinstance(k, str)]
    # Threads of one recorded conversation (sessions.ingest.recorded_requests): the first lists the others.
    first_thread = metadata.get("thread_of") if isinstance(metadata.get("thread_of"), str) else None
    threads = [k for k in metadata.get("threads") or () if isinstance(k, str)] if isinstance(
        metadata.get("threads"), list) else []
    wanted = Q(metadata__parent_session=session.key) | Q(key__in=listed + threads)
    if parent_key:
        wanted |= Q(key=parent_key)
    if first_thread:
        wanted |= Q(key=first_thread) | Q(metadata__thread_of=first_thread)
    found = (Session.objects.filter(wanted, project_id=session.project_id, being_imported=False)
             .exclude(pk=session.pk).select_related("project")
             .only("key", "title", "message_count", "metadata", "project__name").order_by("key"))
    parent, children, thread_sessions = None, [], []
    for other in found:
        if other.key == parent_key:
            parent = other
        elif other.key == first_thread or other.key in threads or (
                first_thread and (other.metadata or {}).get("thread_of") == first_thread):
            thread_sessions.append(other)
        else:
            children.append(other)
    call_id = metadata.get("parent_tool_call_id")
    return {"parent": parent, "parent_key": parent_key, "sub_agents": children,
            "threads": thread_sessions, "thread_of": first_thread,
            "parent_tool_call_id": call_id, "parent_call_seq": _call_seq(parent, call_id),
            "missing_sub_agents": sorted(set(listed) - {c.key for c in children})}


def _call_seq(parent: Session | None, call_id) -> int | None:
    """The seq of the parent's message holding the tool call that started a sub-agent: the call its
    result (the sub-agent's answer) points at."""
    if parent is None or not isinstance(call_id, str) or not call_id:
        return None
    return (Message.objects.filter(session=parent, tool_call_id=call_id, call_seq__isnull=False)
            .values_list("call_seq", flat=True).first())


def metadata_panel(session: Session) -> dict:
    return {"items": metadata_items(session.metadata), "imported": imported_from(session), **relatives(session)}


def attribute_groups(attributes: dict) -> tuple[list, list]:
    """A message's attributes split into those shown when the table is opened and those folded behind
    "n more": empty values (null, "", {}, []) and the source application's bookkeeping."""
    shown, more = [], []
    for key, value in (attributes or {}).items():
        quiet = value is None or value in ("", {}, []) or key in BOOKKEEPING_ATTRIBUTES
        (more if quiet else shown).append((key, value))
    return shown, more


def fold_text(text: str, tokens: int = 0) -> Folded | None:
    """A long text as a preview and the rest, or None when it is short enough to show whole. The preview
    ends at a line break or a space near PREVIEW_CHARS, so no word is cut."""
    if not text or not (len(text) > FOLD_CHARS or (tokens > FOLD_TOKENS and len(text) > PREVIEW_CHARS)):
        return None
    cut = PREVIEW_CHARS
    for mark in ("\n", " "):
        at = text.rfind(mark, PREVIEW_CHARS // 2, PREVIEW_CHARS)
        if at > 0:
            cut = at + 1
            break
    return Folded(text[:cut], text[cut:])
