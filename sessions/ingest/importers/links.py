"""Linking a conversation's sessions across files: a parent session and its sub-agent sessions.

Claude Code runs a sub-agent in a thread of its own, written either into the parent's file or into a
file of its own (`agent-*.jsonl`), always carrying the parent's `sessionId`. Whatever the order the
files are imported in, the parent's `metadata.sidechains` lists its sub-agent sessions and each
sub-agent's `metadata.parent_session` names the parent. Links are written only when they change, so
importing a file again changes nothing.
"""

from sessions.ingest.session_store import update_session
from sessions.models import Project, Session
from sessions.wire.parsed import ImportedSession


def _relatives(project: Project, imported: ImportedSession) -> tuple[list[Session], list[Session]]:
    """The stored sessions of the same family (parents, sub-agents), without the imported one."""
    path, value = imported.family
    # Only sessions that imports made and the application never wrote to: an import changes no other.
    family = Session.objects.filter(project=project, **{f"metadata__{path}": value}).exclude(key=imported.key) \
        .exclude(import_source="").exclude(written_by_application=True)
    parents, subs = [], []
    for session in family.order_by("key"):
        (subs if (session.metadata or {}).get("sidechain") else parents).append(session)
    return parents, subs


def with_links(project: Project, imported: ImportedSession) -> dict | None:
    """The imported session's metadata, linked to the relatives already stored."""
    metadata = imported.metadata
    if imported.family is None or metadata is None:
        return metadata
    parents, subs = _relatives(project, imported)
    metadata = dict(metadata)
    if metadata.get("sidechain"):
        if parents:
            metadata["parent_session"] = parents[0].key
    elif subs or metadata.get("sidechains"):
        metadata["sidechains"] = sorted({*metadata.get("sidechains", ()), *(s.key for s in subs)})
    return metadata


def link_relatives(project: Project, imported: ImportedSession, actor: str) -> None:
    """Point the stored relatives back at the session just imported."""
    if imported.family is None or imported.metadata is None:
        return
    parents, subs = _relatives(project, imported)
    if imported.metadata.get("sidechain"):
        for parent in parents[:1]:
            listed = parent.metadata.get("sidechains", [])
            if imported.key not in listed:
                _set(project, parent, "sidechains", sorted([*listed, imported.key]), actor)
        return
    for sub in subs:
        if sub.metadata.get("parent_session") != imported.key:
            _set(project, sub, "parent_session", imported.key, actor)


def _set(project: Project, session: Session, name: str, value, actor: str) -> None:
    update_session(project, session.key, {"metadata": {**session.metadata, name: value}}, actor,
                   import_source=session.import_source)
