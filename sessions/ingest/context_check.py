"""Context checks: does a conversation keep the facts that must survive compaction? (issue 41, items 4-5)

Given a transcript (a file in any import format, read by the importers; its messages; or an existing
session) and settings (`max_tokens`, `keep_recent_tokens`, summarizer, pinned facts), the conversation is
replayed message by message through the product's own code: each message appended, then automatic
compaction run in this process whenever the model input is over `max_tokens`, as the worker would. It all
happens in a scratch project inside one transaction that is rolled back: nothing is stored.

For every pinned fact's literal and every literal the caller expects, the check reports the first message
holding it, every model input after that which does not carry it (as of which message), and the
checkpoints whose summaries lost it. A model input carries a literal when its latest checkpoint's summary
does (sessions.context.facts.carries: white space folded, any case) or a message after that checkpoint
holds it. `passed` says whether every named fact survived."""

import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

from django.db import connection, transaction

from sessions.context.compaction import AUTO, needs_auto_compaction
from sessions.context.compaction_runs import compact
from sessions.context.exports import iter_messages, message_record
from sessions.context.facts import carries, fold
from sessions.context.pinned import clean_pinned, facts_of
from sessions.errors import DomainError
from sessions.ingest.append import append_messages
from sessions.ingest.importers.runner import import_path
from sessions.ingest.session_store import update_session
from sessions.models import Project, Session

KEY = "context-check"
MAX_SHOWN = 50  # model inputs listed per lost fact; the count is always whole
MAX_RUNS_PER_MESSAGE = 5  # automatic runs after one message: each covers what the last left over
ROW_RENEWED_EVERY = 100  # messages, on PostgreSQL (_renew_row)
RENEWED_ON = ("postgresql",)


@dataclass
class FactResult:
    name: str
    literal: str
    first_seq: int | None = None  # the first message holding it; None: no message does
    lost_at: list[int] = field(default_factory=list)  # model inputs (as of message N) that do not carry it
    lost_count: int = 0
    lost_by: list[int] = field(default_factory=list)  # the checkpoints (numbers) whose summaries lost it

    @property
    def passed(self) -> bool:
        return self.first_seq is not None and not self.lost_count

    def as_dict(self) -> dict:
        return {"name": self.name, "literal": self.literal, "first_seq": self.first_seq, "passed": self.passed,
                "lost_count": self.lost_count, "lost_at": self.lost_at, "lost_by": self.lost_by}


@dataclass
class CheckReport:
    conversation: str
    messages: int = 0
    checkpoints: int = 0
    failed_runs: list[str] = field(default_factory=list)
    facts: list[FactResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return all(fact.passed for fact in self.facts)

    def as_dict(self) -> dict:
        return {"conversation": self.conversation, "passed": self.passed, "messages": self.messages,
                "checkpoints": self.checkpoints, "failed_runs": self.failed_runs,
                "facts": [fact.as_dict() for fact in self.facts], "seconds": round(self.seconds, 3)}


@dataclass
class Settings:
    max_tokens: int | None = None
    keep_recent_tokens: int | None = None
    summarizer: str | None = None
    pinned_facts: list[dict] = field(default_factory=list)
    expect: list[str] = field(default_factory=list)


def _texts(message: dict) -> list[str]:
    content = message.get("content")
    texts = [content] if isinstance(content, str) else [
        part.get("text", "") for part in content or () if isinstance(part, dict)]
    texts += [str(call.get("arguments", "")) for call in message.get("tool_calls") or ()]
    return texts


def check_messages(label: str, messages: list[dict], settings: Settings) -> CheckReport:
    """Replay `messages` (ctxweb messages) in a scratch project, rolled back; see the module."""
    started = time.perf_counter()
    pins = clean_pinned(settings.pinned_facts)
    expect = [literal for literal in settings.expect if isinstance(literal, str) and literal.strip()]
    report = CheckReport(label)
    with transaction.atomic():
        project = Project.objects.create(name=f"context-check-{uuid.uuid4().hex[:12]}", title="context check (scratch)",
                                         pinned_facts=pins)
        compaction = {"auto": True, **{name: value for name, value in (
            ("max_tokens", settings.max_tokens), ("keep_recent_tokens", settings.keep_recent_tokens),
            ("summarizer", settings.summarizer)) if value is not None}}
        update_session(project, KEY, {"compaction": compaction}, "context-check")
        facts = facts_of(pins)
        results: dict[str, FactResult] = {literal: FactResult(literal, literal) for literal in expect}
        occurrences: dict[str, int] = {}  # literal -> the last message holding it
        checkpoint = None
        folded = ""
        renew, key = connection.vendor in RENEWED_ON, KEY
        for index, message in enumerate(messages):
            if renew and index and index % ROW_RENEWED_EVERY == 0:
                key = _renew_row(project, key, f"{KEY}-{index}")
            appended = append_messages(project, key, [message], "context-check", compact_after=False)
            stored = appended.messages[0]
            if stored.seq is None:
                continue
            seq, session = stored.seq, appended.session
            report.messages += 1
            texts = _texts(message) if message.get("role") != "system" else []  # a system message is not sent
            for fact in facts:
                for text in texts:
                    for literal in fact.literals(text):
                        results.setdefault(literal, FactResult(fact.name, literal))
            for literal, result in results.items():
                if any(literal in text for text in texts):
                    occurrences[literal] = seq
                    if result.first_seq is None:
                        result.first_seq = seq
            for run in range(MAX_RUNS_PER_MESSAGE):
                if run:  # the append's session holds its figures; a compaction changed them since
                    session = Session.objects.get(pk=session.pk)
                if not needs_auto_compaction(session):
                    break
                outcome = compact(session, trigger=AUTO, actor="context-check")
                if outcome.status == "failed":
                    report.failed_runs.append(f"after #{seq}: {outcome.error}")
                if outcome.checkpoint is None:
                    break
                checkpoint, folded = outcome.checkpoint, fold(outcome.checkpoint.summary)
                report.checkpoints += 1
            for literal, result in results.items():
                if result.first_seq is None or checkpoint is None or result.first_seq > checkpoint.last_seq:
                    continue
                if carries(folded, literal) or occurrences.get(literal, 0) > checkpoint.last_seq:
                    continue
                result.lost_count += 1
                if len(result.lost_at) < MAX_SHOWN:
                    result.lost_at.append(seq)
                if checkpoint.number not in result.lost_by:
                    result.lost_by.append(checkpoint.number)
        transaction.set_rollback(True)
    report.facts = sorted(results.values(), key=lambda r: (r.first_seq is None, r.first_seq or 0, r.literal))
    report.seconds = time.perf_counter() - started
    return report


def _renew_row(project: Project, key: str, new_key: str) -> str:
    """Move the scratch session to a new row, under a new key; returns the key. PostgreSQL keeps every
    version of a row that a transaction updates until the transaction ends, with an index entry for each,
    and each read or update of the row by its key walks them all: the scratch session's row, updated by
    every append of the one transaction the replay runs in, made it quadratic (15 s for 1,000 turns, against
    3 s on SQLite). A copy of the row under another key, with what points at it moved over, starts again
    from one version."""
    fresh = Session.objects.get(project=project, key=key)
    old_pk = fresh.pk
    fresh.pk, fresh.key = None, new_key
    fresh.save(force_insert=True)
    for relation in Session._meta.related_objects:
        if relation.one_to_many:
            field = relation.field.name
            relation.related_model._base_manager.filter(**{field: old_pk}).update(**{field: fresh.pk})
    Session.objects.filter(pk=old_pk).delete()
    return new_key


def session_messages(session: Session) -> list[dict]:
    """An existing session's messages as the append takes them (the lossless export's records)."""
    return [message_record(message) for message in iter_messages(session)]


def check_session(session: Session, settings: Settings) -> CheckReport:
    return check_messages(session.key, session_messages(session), settings)


def check_file(path: Path, settings: Settings, *, fmt: str = "auto", only: str | None = None) -> list[CheckReport]:
    """Check each conversation of a transcript file (or the one named `only`), read by the importers into a
    scratch project that is rolled back."""
    with transaction.atomic():
        scratch = Project.objects.create(name=f"context-check-{uuid.uuid4().hex[:12]}", title="import (scratch)")
        imported = import_path(scratch, Path(path), fmt=fmt)
        if imported.error:
            raise DomainError(f"{path}: {imported.error}", code="invalid_transcript")
        keys = [key for key in imported.keys if only is None or key == only]
        if only is not None and not keys:
            raise DomainError(f"{path} holds no conversation {only!r}; it holds {', '.join(imported.keys[:10])}",
                              code="session_not_found", status=404)
        conversations = [(key, session_messages(Session.objects.get(project=scratch, key=key))) for key in keys]
        transaction.set_rollback(True)
    return [check_messages(key, messages, settings) for key, messages in conversations]


def junit_xml(reports: list[CheckReport]) -> bytes:
    """A JUnit XML report: a test suite per conversation, a test case per fact, a failure for a lost one."""
    root = ElementTree.Element("testsuites", name="ctxweb context check")
    for report in reports:
        failures = sum(not fact.passed for fact in report.facts)
        suite = ElementTree.SubElement(root, "testsuite", name=report.conversation, tests=str(len(report.facts)),
                                       failures=str(failures), time=f"{report.seconds:.3f}")
        for fact in report.facts:
            case = ElementTree.SubElement(suite, "testcase", classname=report.conversation,
                                          name=f"{fact.name}: {fact.literal}")
            if fact.first_seq is None:
                ElementTree.SubElement(case, "failure", message="no message holds it").text = (
                    f"{fact.literal!r} appears in no message of the conversation")
            elif fact.lost_count:
                ElementTree.SubElement(case, "failure", message=f"lost by checkpoint {fact.lost_by[0]}").text = (
                    f"{fact.literal!r} (first in message #{fact.first_seq}) is missing from {fact.lost_count} model "
                    f"input(s), as of messages {', '.join(f'#{n}' for n in fact.lost_at[:10])}; lost by checkpoint(s) "
                    f"{', '.join(str(n) for n in fact.lost_by)}")
    return ElementTree.tostring(root, encoding="utf-8", xml_declaration=True)
