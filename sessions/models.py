"""The data model: projects, sessions, the raw log of messages, checkpoints and events."""

import json
from dataclasses import dataclass

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

# `.` and `..` are refused: as a path segment a browser resolves them away, so no page could show them.
SESSION_KEY_RE = r"^(?!\.\.?$)[A-Za-z0-9._:@-]{1,200}$"
SESSION_KEY_RULE = "A session key is 1-200 characters of A-Z a-z 0-9 . _ : @ -, and not . or .."
session_key_validator = RegexValidator(SESSION_KEY_RE, SESSION_KEY_RULE)


class Role(models.TextChoices):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    AGENT = "agent"


class EventType(models.TextChoices):
    SESSION_CREATED = "SESSION_CREATED"
    SESSION_UPDATED = "SESSION_UPDATED"
    MESSAGES_APPENDED = "MESSAGES_APPENDED"
    MESSAGE_UPDATED = "MESSAGE_UPDATED"
    COMPACTION_STARTED = "COMPACTION_STARTED"
    COMPACTION_COMPLETED = "COMPACTION_COMPLETED"
    COMPACTION_SKIPPED = "COMPACTION_SKIPPED"
    COMPACTION_FAILED = "COMPACTION_FAILED"
    REQUEST_BUILT = "REQUEST_BUILT"
    NOTE_ADDED = "NOTE_ADDED"
    NOTE_EDITED = "NOTE_EDITED"
    NOTE_DELETED = "NOTE_DELETED"
    TAGS_CHANGED = "TAGS_CHANGED"
    REVIEW_ADDED = "REVIEW_ADDED"
    MASKING_REVEALED = "MASKING_REVEALED"


@dataclass(frozen=True)
class CompactionSettings:
    max_tokens: int
    keep_recent_tokens: int
    auto: bool
    summarizer: str


class Project(models.Model):
    name = models.SlugField(max_length=100, unique=True)
    title = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    # Compaction defaults for the project's sessions; empty means the server default.
    max_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    keep_recent_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    auto_compact = models.BooleanField(null=True, blank=True)
    summarizer = models.CharField(max_length=50, blank=True, default="")
    # Personal data shown masked to viewers (sessions/access/masking_policy.py): {"enabled": bool,
    # "patterns": [{"name", "pattern"}]}; empty: off.
    masking = models.JSONField(default=dict, blank=True)
    # Literals no summary may lose (sessions/context/pinned.py): [{"name", "pattern" | "value"}].
    pinned_facts = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class Session(models.Model):
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="sessions")
    key = models.CharField(max_length=200, validators=[session_key_validator])
    title = models.CharField(max_length=300, blank=True, default="")
    metadata = models.JSONField(default=dict, blank=True)
    instructions = models.TextField(blank=True, default="")
    instructions_tokens = models.PositiveBigIntegerField(default=0)

    # Compaction settings; empty means the project's, then the server's default.
    max_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    keep_recent_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    auto_compact = models.BooleanField(null=True, blank=True)
    summarizer = models.CharField(max_length=50, blank=True, default="")
    pinned_facts = models.JSONField(default=list, blank=True)  # besides the project's (sessions/context/pinned.py)

    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    last_activity_at = models.DateTimeField(default=timezone.now)

    # Denormalised figures, kept correct in the same transaction that changes what they count.
    message_count = models.PositiveIntegerField(default=0)  # also the highest seq: seqs are gapless
    raw_tokens = models.PositiveBigIntegerField(default=0)
    # The model input as built now: its size, how many stored messages it holds, what it leaves out
    # for validity (Omission.as_dict() items), and where the latest checkpoint ends. Kept up to date by
    # sessions.context.model_input on every change, so pages and lists never lay the whole log out.
    input_tokens = models.PositiveBigIntegerField(default=0)
    input_messages = models.PositiveIntegerField(default=0)
    input_left_out = models.JSONField(default=list, blank=True)
    checkpoint_last_seq = models.PositiveIntegerField(default=0)
    checkpoint_count = models.PositiveIntegerField(default=0)
    failed_compactions = models.PositiveIntegerField(default=0)
    tags = models.ManyToManyField("Tag", blank=True, related_name="sessions")
    # Who writes to the session (sessions/ingest/importers/rules.py): an import creates a session from one
    # source file (`import_source`, its name) and may later resume it from the same file, as long as the
    # application has not written to it; the application's own sessions are never changed by an import.
    import_source = models.CharField(max_length=300, blank=True, default="")
    written_by_application = models.BooleanField(default=False)
    # Set while a streamed import stores the session chunk by chunk: the session is hidden until its
    # import has stored every message, so a stopped import leaves nothing of it to see.
    being_imported = models.BooleanField(default=False)
    # How many recorded requests (RecordedRequest) the session was rebuilt from; 0 for sessions written
    # through the append API or imported from transcripts.
    request_count = models.PositiveIntegerField(default=0)
    # Where the session's pinned facts stand (sessions/context/pinned_status.py): the declarations they
    # were read for (a digest), the last message read for them, and how many pinned literals the latest
    # checkpoint's summary does not carry (the sessions list's "pinned fact lost" filter).
    pinned_key = models.CharField(max_length=64, blank=True, default="")
    pinned_through = models.PositiveIntegerField(default=0)
    pinned_lost = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "key"], name="session_key_unique_per_project"),
        ]
        indexes = [
            # The sessions list sorts by these within a project.
            models.Index(fields=["project", "-last_activity_at"], name="session_project_activity"),
            models.Index(fields=["project", "-raw_tokens"], name="session_project_tokens"),
            # A review queue hands out its sessions oldest first (sessions/store/review_queues.py next_in_queue).
            models.Index(fields=["project", "created_at"], name="session_project_created"),
        ]

    def __str__(self):
        return f"{self.project.name}/{self.key}" if self.project_id else self.key

    def get_absolute_url(self) -> str:
        return self.url("session")

    @property
    def last_seq(self) -> int:
        return self.message_count

    def url(self, name: str, *args) -> str:
        """The URL of one of the session's dashboard pages (sessions/urls.py, session_patterns)."""
        return reverse(name, args=[self.project.name, self.key, *args])

    def compaction_settings(self) -> CompactionSettings:
        project = self.project

        def pick(own, from_project, default):
            if own is not None and own != "":
                return own
            if from_project is not None and from_project != "":
                return from_project
            return default

        return CompactionSettings(
            max_tokens=pick(self.max_tokens, project.max_tokens, settings.CTXWEB_MAX_TOKENS),
            keep_recent_tokens=pick(
                self.keep_recent_tokens, project.keep_recent_tokens, settings.CTXWEB_KEEP_RECENT_TOKENS
            ),
            auto=pick(self.auto_compact, project.auto_compact, settings.CTXWEB_AUTO_COMPACT),
            summarizer=pick(self.summarizer, project.summarizer, settings.CTXWEB_SUMMARIZER),
        )


class MessageManager(models.Manager):
    def get_queryset(self):
        # A message's rendering for the model input is read only by that input's own SQL
        # (formats.stored_openai_response): every other read leaves it, as big as the content, unread.
        return super().get_queryset().defer("openai_message")


# The message fields sent to the model besides role, content, tool calls and tool_call_id, each with what
# a message without it holds. A new one is declared here (with its column below and a migration), in the
# ctxweb schema (sessions/wire/ctxweb.py MessageIn) and in the wire module of each provider format that
# carries it; the model input's read (sessions/db/messages.py), its entries (sessions/context/model_input.py
# and recorded_input.py), the duplicate digest (sessions/wire/validation.py) and the ctxweb rendering take
# it from here.
MODEL_FIELDS: dict[str, str | bool] = {"name": "", "is_error": False}


class Message(models.Model):
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="messages")
    seq = models.PositiveIntegerField()
    # The client's id for the message, or one the server made; unique within the session.
    client_id = models.CharField(max_length=200)
    role = models.CharField(max_length=16, choices=Role.choices)
    # A string, or a list of {"type": "text"|"image", ...} parts, exactly as stored.
    content = models.JSONField(default=str, blank=True)
    # Plain text of the content (text parts joined), for search, summaries and display.
    text = models.TextField(blank=True, default="")
    has_content = models.BooleanField(default=True)
    reasoning = models.TextField(blank=True, default="")
    tool_calls = models.JSONField(default=list, blank=True)  # [{"id", "name", "arguments"}]
    call_ids = models.JSONField(default=list, blank=True)  # the ids of tool_calls, in order
    tool_call_id = models.CharField(max_length=200, blank=True, default="")
    # For a tool result: the seq of the assistant message whose call it answers (nearest preceding).
    call_seq = models.PositiveIntegerField(null=True, blank=True)
    name = models.CharField(max_length=200, blank=True, default="")
    # For a tool result: the tool reported a failure (Anthropic's tool_result.is_error).
    is_error = models.BooleanField(default=False)
    attributes = models.JSONField(default=dict, blank=True)
    include_in_messages = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    # The text's runs of Chinese, Japanese, Korean, Thai... as overlapping pairs of characters, indexed
    # with the text so a word inside a sentence is found (sessions/wire/grams.py); "" for other text.
    search_grams = models.TextField(blank=True, default="")

    # Token figures, computed once when the message is stored.
    tokens = models.PositiveBigIntegerField(default=0)
    tool_call_tokens = models.JSONField(default=list, blank=True)  # per call, part of `tokens`
    reasoning_tokens = models.PositiveBigIntegerField(default=0)  # shown, not part of `tokens`
    digest = models.CharField(max_length=64)  # of the model-visible fields, for duplicate detection
    # The message as the `openai` format of the model input sends it whole (sessions.context.provider_input.
    # stored_openai_message), JSON text written when it is stored, so a fetch of that input writes it as it
    # is instead of reading, checking and rendering every field again. NULL for a system message and
    # where it could not be written; a fetch renders those as before. NULL, not "": the read counts the
    # renderings it joins (count() leaves NULL out) and would join an empty one into invalid JSON.
    openai_message = models.TextField(null=True, blank=True)  # noqa: DJ001

    objects = MessageManager()

    class Meta:
        constraints = [
            # Also the index behind every raw-log and model-input range query.
            models.UniqueConstraint(fields=["session", "seq"], name="message_seq_unique_per_session"),
            models.UniqueConstraint(fields=["session", "client_id"], name="message_id_unique_per_session"),
        ]
        indexes = [
            models.Index(fields=["session", "call_seq"], name="message_session_call_seq"),
            # The newest assistant message before a batch (incremental model-input size on append).
            models.Index(fields=["session", "role", "seq"], name="message_session_role_seq"),
        ]
        ordering = ["session", "seq"]

    def __str__(self):
        return f"#{self.seq} {self.role}"


class Checkpoint(models.Model):
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="checkpoints")
    # The checkpoint this one extends. One-to-one: at most one checkpoint ever extends a given one, so
    # two compactions from the same base cannot both succeed.
    previous = models.OneToOneField(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="next"
    )
    summary = models.TextField()
    first_seq = models.PositiveIntegerField()  # first seq newly covered (previous.last_seq + 1)
    last_seq = models.PositiveIntegerField()  # last original message covered
    created_at_seq = models.PositiveIntegerField()  # highest seq stored when it was created
    # What people call it: 1, 2, 3 within its session, in creation order (the id is global). Set by save()
    # as previous.number + 1; checkpoints are made under the session's row lock.
    number = models.PositiveIntegerField()
    summary_tokens = models.PositiveBigIntegerField()  # the summary message, prefix included
    replaced_tokens = models.PositiveBigIntegerField(default=0)
    tokens_before = models.PositiveBigIntegerField(default=0)
    tokens_after = models.PositiveBigIntegerField(default=0)
    summarizer = models.CharField(max_length=50)
    trigger = models.CharField(max_length=20, default="request")
    created_at = models.DateTimeField(default=timezone.now)
    # The salient literals (sessions/context/facts.py) of the messages it newly covers that its summary does
    # not carry, counted and listed when it is made, so pages never scan the covered text again:
    # lost_facts holds the first facts.MAX_STORED, most repeated first ({"text", "kind", "count", "seqs"}).
    facts_kept = models.PositiveIntegerField(default=0)
    facts_lost = models.PositiveIntegerField(default=0)
    lost_facts = models.JSONField(default=list, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["session"], condition=Q(previous__isnull=True), name="one_first_checkpoint_per_session"
            ),
            models.CheckConstraint(condition=Q(last_seq__gte=models.F("first_seq")), name="checkpoint_range_valid"),
            models.UniqueConstraint(fields=["session", "number"], name="checkpoint_number_per_session"),
        ]
        indexes = [
            models.Index(fields=["session", "-last_seq"], name="checkpoint_session_last_seq"),
            models.Index(fields=["session", "-created_at_seq"], name="checkpoint_session_created"),
        ]
        ordering = ["session", "last_seq"]

    def __str__(self):
        return f"checkpoint {self.number} (1–{self.last_seq})"

    def save(self, *args, **kwargs):
        if self.number is None:
            # One more than the checkpoint it extends (in memory when sessions.context.checkpoints.store_checkpoint
            # passes it); a session's first checkpoint (one per session, by constraint) is 1.
            self.number = self.previous.number + 1 if self.previous_id is not None else 1
        super().save(*args, **kwargs)

    @property
    def own_count(self) -> int:
        return self.last_seq - self.first_seq + 1


class PinnedSighting(models.Model):
    """A pinned fact's literal and the message it first appeared in (sessions/context/pinned_status.py)."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="pinned_sightings")
    name = models.CharField(max_length=50)
    literal = models.TextField()
    seq = models.PositiveIntegerField()

    class Meta:
        indexes = [models.Index(fields=["session", "seq"], name="pinned_sighting_session_seq")]

    def __str__(self):
        return f"{self.name}: {self.literal} (#{self.seq})"


class TraceBlock(models.Model):
    """Which three-character runs of letters and digits a block of a session's messages holds, so Trace
    reads only the blocks that can hold a string (sessions/store/trace_blocks.py). Level 0: the messages
    number * BLOCK + 1 to (number + 1) * BLOCK; level 1: the level-0 blocks number * SPAN to
    (number + 1) * SPAN - 1, all of them. Written once a block is whole; messages never change after."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="trace_blocks")
    level = models.PositiveSmallIntegerField()
    number = models.PositiveIntegerField()
    grams = models.BinaryField()  # zlib of a bitset over the 36**3 trigrams of [0-9A-Z]

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "level", "number"], name="trace_block_unique"),
        ]

    def __str__(self):
        return f"trace block {self.level}/{self.number}"


class Event(models.Model):
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="events")
    type = models.CharField(max_length=40, choices=EventType.choices)
    actor = models.CharField(max_length=200, default="system")
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            models.Index(fields=["session", "id"], name="event_session_order"),
            models.Index(fields=["session", "type", "id"], name="event_session_type"),
        ]
        ordering = ["session", "id"]

    def __str__(self):
        return f"{self.type} by {self.actor}"


class JSONTextField(models.TextField):
    """JSON kept as the text it was written as: key order and all, on every database. PostgreSQL's jsonb
    (what JSONField uses) reorders keys, and a recorded request must give back exactly what was sent."""

    def from_db_value(self, value, expression, connection):
        return None if value is None else json.loads(value)

    def to_python(self, value):
        return json.loads(value) if isinstance(value, str) else value

    def get_prep_value(self, value):
        return None if value is None else json.dumps(value, ensure_ascii=False)

    def value_to_string(self, obj):
        return self.get_prep_value(self.value_from_object(obj))

    def get_placeholder(self, value, compiler, connection):
        """A plain placeholder. Having one at all keeps Django's bulk_create on PostgreSQL from sending a
        column of these as one array (its UNNEST insert, Django 5.2), which psycopg's client-side binding
        quotes element by element in Python: recording 512 spans, two a conversation, spent 2.2 s of its
        10 s there, quoting each request's messages."""
        return "%s"


class RecordedRequest(models.Model):
    """One request an application sent to its model, captured from outside (an OpenTelemetry span of an
    LLM call received at /v1/traces, or one line of a request log), holding exactly what was sent.

    A session with recorded requests is rebuilt from them (sessions.ingest.recorded_requests): each message
    sent is matched to a raw message (role and digest, tool call ids where present) or appended to the
    raw log, the response is appended after its request, and system messages set the instructions as of
    that request. `number` orders the session's requests by start time (1, 2, 3...); requests arriving out
    of order are renumbered.
    """

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="recorded_requests")
    number = models.PositiveIntegerField(default=0)
    # The span id (hex), or for a request-log line a digest of the file and line: a retried export or a
    # re-imported file stores nothing twice.
    external_id = models.CharField(max_length=200)
    source = models.CharField(max_length=20)  # "otlp" | "request_log" | "trajectory"
    trace_id = models.CharField(max_length=64, blank=True, default="")
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    model = models.CharField(max_length=200, blank=True, default="")
    provider = models.CharField(max_length=100, blank=True, default="")  # gen_ai.system / llm.provider
    parameters = models.JSONField(default=dict, blank=True)  # temperature, max_tokens, tools...
    # Exactly the messages sent, as OpenAI Chat Completions message objects, and the response's messages.
    messages = JSONTextField(default=list, blank=True)
    response = JSONTextField(default=list, blank=True)
    # Token figures: ours (the messages sent, counted like a model input) and the provider's, if reported.
    tokens = models.PositiveBigIntegerField(default=0)
    usage_input_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    usage_output_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    # For each message sent, in order: the seq of the raw message it is, or null (a system message,
    # which sets the instructions, or a message matching no raw message: an application-side summary or
    # rewritten message, listed in `unmatched`).
    message_seqs = models.JSONField(default=list, blank=True)
    unmatched = models.JSONField(default=list, blank=True)  # indexes into `messages`
    # The raw seqs this request's response was stored as.
    response_seqs = models.JSONField(default=list, blank=True)
    # Raw seqs the previous request carried, or that were appended since it, which this one no longer
    # carries: what the application itself dropped (or replaced, when `unmatched` is not empty).
    dropped_seqs = models.JSONField(default=list, blank=True)
    # Indexes into `messages` of the messages the application sent in a form of its own (a trimmed tool
    # output, an elided observation): each is the raw message its `message_seqs` item names, edited.
    edited = models.JSONField(default=list, blank=True)
    # Each message's tokens as sent (system messages included), counted once when it is recorded.
    message_tokens = models.JSONField(default=list, blank=True)
    # What matching the next request needs of this one without reading its messages again: for each
    # message sent, and each message of the response, [role, digest, tool ids] (sessions.ingest.recorded_requests).
    message_keys = models.JSONField(default=list, blank=True)
    response_keys = models.JSONField(default=list, blank=True)
    # The highest raw seq stored when it was sent (its own new messages included, its response not): the
    # model input as of a message is the request in force then, the latest whose at_seq is not after it.
    at_seq = models.PositiveIntegerField(default=0)
    # Not captured but worked out (a SWE-agent trajectory's declared history processors applied to its
    # history): how, in a sentence. Empty for a request recorded as it was sent.
    derived_from = models.CharField(max_length=300, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "external_id"], name="recorded_request_unique_per_session"),
        ]
        indexes = [
            models.Index(fields=["session", "number"], name="recorded_request_number"),
            models.Index(fields=["session", "started_at"], name="recorded_request_started"),
            # The request in force as of a message: the highest number whose at_seq is not after it.
            models.Index(fields=["session", "at_seq"], name="recorded_request_at_seq"),
        ]
        ordering = ["session", "number"]

    def __str__(self):
        return f"request {self.number} of {self.session}"


class ApiKey(models.Model):
    """A key an application sends as `Authorization: Bearer <secret>`. It belongs to one project and
    sees only that project's sessions. The secret is shown once; only its SHA-256 is stored."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16)  # the secret's first characters: shown, and looked up
    secret_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # A key for people's tools rather than the application: where the project masks personal data, its
    # answers are masked as a viewer's pages are (sessions/access/masking_policy.py).
    masked = models.BooleanField(default=False)
    # Rate limits (sessions/access/rate_limits.py). Each token bucket is kept as the moment it is full again, in
    # seconds since the epoch, so one conditional UPDATE takes from both.
    requests_refilled_at = models.FloatField(default=0)
    bytes_refilled_at = models.FloatField(default=0)
    # What the dashboard shows: requests, body bytes and refused requests since usage_since, a counting
    # window restarted by the first request more than a minute after it began; and refusals ever.
    usage_since = models.FloatField(default=0)
    usage_requests = models.PositiveIntegerField(default=0)
    usage_bytes = models.PositiveBigIntegerField(default=0)
    usage_throttled = models.PositiveIntegerField(default=0)
    throttled_total = models.PositiveBigIntegerField(default=0)

    class Meta:
        indexes = [
            # authenticate() finds a key by its prefix, then compares hashes in constant time.
            models.Index(fields=["prefix"], name="api_key_prefix"),
        ]
        ordering = ["project", "-created_at"]

    def __str__(self):
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class Membership(models.Model):
    """A user's role in a project: viewer (read, search, annotate, export), editor (also compact and
    change include_in_messages), admin (also API keys and members). Superusers see every project."""

    class Role(models.TextChoices):
        VIEWER = "viewer"
        EDITOR = "editor"
        ADMIN = "admin"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "project"], name="one_membership_per_project")]
        ordering = ["project", "user"]

    def __str__(self):
        return f"{self.user} is {self.role} of {self.project}"


class MaskingReveal(models.Model):
    """A session's personal data shown unmasked to one viewer, as an editor or admin chose (recorded as a
    MASKING_REVEALED event on the session)."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="masking_reveals")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    revealed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                    related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "user"], name="masking_reveal_once_per_viewer")]

    def __str__(self):
        return f"{self.session_id} revealed to {self.user_id}"


class Tag(models.Model):
    """A label support staff put on sessions (needs-review, bug, ...), per project."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="tags")
    name = models.SlugField(max_length=50)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="tag_name_unique_per_project")]
        ordering = ["name"]

    def __str__(self):
        return self.name


class Note(models.Model):
    """A note a person leaves on a session or on one of its messages. Notes are for people: they are
    never part of the raw log or the model input."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="notes")
    seq = models.PositiveIntegerField(null=True, blank=True)  # the message it is about; empty: the session
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    text = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["session", "seq"], name="note_session_seq")]
        ordering = ["session", "created_at", "pk"]

    def __str__(self):
        where = f"#{self.seq}" if self.seq else "session"
        return f"note on {where} by {self.author}"


class Verdict(models.TextChoices):
    OK = "ok"
    PROBLEM = "problem"
    UNSURE = "unsure"


class ReviewQueue(models.Model):
    """A saved filter of the sessions list whose sessions people review one after another: whatever
    matches it now, sessions stored since it was made included, is handed out oldest first, each to one
    reviewer at a time (sessions/store/review_queues.py)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="review_queues")
    name = models.CharField(max_length=100)
    # The sessions list's query string (`meta=reward<1&tag=refund`), read by the list's own form.
    filter = models.TextField(blank=True, default="")
    labels = models.JSONField(default=list, blank=True)  # the labels a review in this queue may carry
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="review_queue_name_unique_per_project"),
        ]
        ordering = ["project", "name"]

    def __str__(self):
        return self.name


class Review(models.Model):
    """A person's (or an application's) judgement of a session: a verdict, labels, a score, a comment,
    the messages it is about. For people, like a note: never part of the raw log or the model input."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="reviews")
    queue = models.ForeignKey(ReviewQueue, on_delete=models.SET_NULL, null=True, blank=True, related_name="reviews")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                               related_name="+")
    reviewer = models.CharField(max_length=200)  # as events name who: user:<username>, api:<key name>
    verdict = models.CharField(max_length=10, choices=Verdict.choices)
    labels = models.JSONField(default=list, blank=True)
    score = models.PositiveSmallIntegerField(null=True, blank=True)  # 1-5
    comment = models.TextField(blank=True, default="")
    seqs = models.JSONField(default=list, blank=True)  # the messages it is about, in seq order
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(score__isnull=True) | Q(score__gte=1, score__lte=5),
                                   name="review_score_1_to_5"),
        ]
        indexes = [
            # A session's reviews, newest first: the latest one's verdict is the list's column and filter.
            models.Index(fields=["session", "-created_at"], name="review_session_latest"),
            # Whether a queue's session has a review from it (next_in_queue, the progress, the CSV).
            models.Index(fields=["queue", "session"], name="review_queue_session"),
        ]
        ordering = ["session", "created_at", "pk"]

    def __str__(self):
        return f"{self.verdict} review of {self.session_id} by {self.reviewer}"


class ReviewClaim(models.Model):
    """A session of a queue handed to one reviewer until `until`, so that two reviewers do not read the
    same one. One claim per session and queue (the constraint two reviewers race on); an expired one is
    taken over by the next reviewer, and a review from its holder ends it."""

    queue = models.ForeignKey(ReviewQueue, on_delete=models.CASCADE, related_name="claims")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    holder = models.CharField(max_length=64)  # "user:<id>" | "key:<id>"
    reviewer = models.CharField(max_length=200)  # the holder as reviews name them
    until = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["queue", "session"], name="review_claim_one_per_queue_session"),
        ]
        indexes = [
            # A reviewer's own claim in a queue, given back by their next "next".
            models.Index(fields=["queue", "holder"], name="review_claim_holder"),
        ]

    def __str__(self):
        return f"claim on {self.session_id} in {self.queue_id} by {self.reviewer}"


class AuthFailure(models.Model):
    """A failed log-in or API key, counted against one subject: the client address (scopes `login` and
    `api_key`), the username tried (`account`) or the key prefix tried (`key_prefix`). Too many in a
    short window and that subject is refused until the window passes (sessions/access/throttle.py)."""

    class Scope(models.TextChoices):
        LOGIN = "login"
        API_KEY = "api_key", "API key"
        ACCOUNT = "account", "log-in account"
        KEY_PREFIX = "key_prefix", "API key prefix"

    subject = models.CharField(max_length=150)
    scope = models.CharField(max_length=10, choices=Scope.choices)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            # Every log-in and API request reads its subjects' recent failures through this index.
            models.Index(fields=["subject", "scope", "-created_at"], name="auth_failure_recent"),
            # Pruning deletes by age.
            models.Index(fields=["created_at"], name="auth_failure_age"),
        ]

    def __str__(self):
        return f"{self.scope} failure of {self.subject}"


class CompactionRun(models.Model):
    """One compaction of a session (sessions/context/compaction_runs.py), done by a worker of the task
    queue or, for `manage.py compact`, by the process that asked for it. The one record of whether a
    session's compaction is under way: events record each attempt, never track it.

    At most one run per session is queued or running at a time (a partial unique constraint), so a
    burst of appends enqueues one. A run that fails or is cut off by a killed worker goes back to
    `queued` with a later `run_after`, up to CTXWEB_COMPACTION_MAX_ATTEMPTS attempts; each attempt
    records its own COMPACTION_STARTED and exactly one terminal event."""

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        COMPLETED = "completed"
        SKIPPED = "skipped"
        FAILED = "failed"

    ACTIVE = (State.QUEUED, State.RUNNING)

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="compaction_runs")
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    trigger = models.CharField(max_length=10, default="auto")  # "auto" | "request"
    actor = models.CharField(max_length=200, default="system")
    # What compact() is called with: force, max_tokens, keep_recent_tokens, summary, summarizer,
    # extra_tokens, extra_starts_turn.
    options = models.JSONField(default=dict, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")
    # The current attempt holds the run until this time; its worker moves it on while alive.
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    run_after = models.DateTimeField(null=True, blank=True)  # a retry waits until then
    task_id = models.CharField(max_length=64, blank=True, default="")  # the task queue's id of its task
    # No constraint in the database: a foreign key may not point into a table partitioned by session
    # (migration 0032); Django still sets it to NULL when its event is deleted.
    started_event = models.ForeignKey(Event, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                                      db_constraint=False)
    outcome = models.JSONField(default=dict, blank=True)  # Outcome.figures() of the last attempt
    # Done by the process that asked for it (compaction_runs.compact), not by a task worker: never retried.
    in_process = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["session"], condition=Q(state__in=["queued", "running"]), name="one_active_compaction_run_per_session"
            ),
        ]
        indexes = [
            models.Index(fields=["session", "-id"], name="compaction_run_session"),
            # The sweep looks for running runs whose lease has passed.
            models.Index(fields=["state", "lease_expires_at"], name="compaction_run_lease"),
        ]

    def __str__(self):
        return f"compaction run {self.pk} of {self.session_id}: {self.state}"

    @property
    def active(self) -> bool:
        return self.state in self.ACTIVE

    @property
    def max_attempts(self) -> int:
        return settings.CTXWEB_COMPACTION_MAX_ATTEMPTS


class ImportJob(models.Model):
    """A transcript file uploaded in the dashboard, imported by the task worker (sessions/ingest/import_jobs.py).
    The counters are progress while it runs and the result when it is done."""

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="import_jobs")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    file_name = models.CharField(max_length=300)
    stored_name = models.CharField(max_length=500, blank=True, default="")  # in CTXWEB_IMPORT_DIR, until done
    # Whether "Run again" may help: false when the file itself is at fault (not JSON, not UTF-8, empty,
    # not of its format), true when the run was (a lost worker, a database error).
    retry_helps = models.BooleanField(default=True)
    size = models.BigIntegerField(default=0)
    format = models.CharField(max_length=30, default="auto")  # as asked; `detected_format` is what was read
    detected_format = models.CharField(max_length=30, blank=True, default="")
    key_prefix = models.CharField(max_length=100, blank=True, default="")
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    bytes_read = models.BigIntegerField(default=0)
    sessions = models.PositiveIntegerField(default=0)
    sessions_created = models.PositiveIntegerField(default=0)
    messages = models.PositiveIntegerField(default=0)
    duplicates = models.PositiveIntegerField(default=0)
    tool_calls = models.PositiveIntegerField(default=0)
    tool_results = models.PositiveIntegerField(default=0)
    checkpoints = models.PositiveIntegerField(default=0)
    entries_skipped = models.PositiveIntegerField(default=0)
    keys = models.JSONField(default=list, blank=True)  # the first sessions' keys, for links
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # A running job's lease, renewed by its worker; a job whose lease passed lost its worker and is put
    # back in the queue by the sweep (sessions/ingest/import_jobs.py), up to CTXWEB_IMPORT_MAX_ATTEMPTS attempts.
    attempts = models.PositiveIntegerField(default=0)
    lease_expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # The import page lists a project's latest jobs.
            models.Index(fields=["project", "-created_at"], name="import_job_recent"),
        ]

    def __str__(self):
        return f"import of {self.file_name} into {self.project} ({self.state})"

    @property
    def done(self) -> bool:
        return self.state in (self.State.COMPLETED, self.State.FAILED)

    @property
    def percent(self) -> int:
        if self.state == self.State.COMPLETED:
            return 100
        return min(99, 100 * self.bytes_read // self.size) if self.size else 0


class WaitSlot(models.Model):
    """The one request of a holder (an API key, a dashboard user) allowed to wait for a compaction run at
    a time (sessions/context/waiting.py): `until` is when its wait ends at the latest, in seconds since the epoch.
    A holder's other requests do not wait, so one client never holds more than one web worker waiting."""

    holder = models.CharField(max_length=64, unique=True)  # "key:<id>" | "user:<id>"
    until = models.FloatField(default=0)

    def __str__(self):
        return f"wait slot of {self.holder}"


class DashboardBudget(models.Model):
    """A dashboard user's rate limits (sessions/access/dashboard_limits.py): token buckets as ApiKey's, each kept
    as the moment it is full again, one of requests and one of CPU-heavy actions (previews, traces,
    exports, searches, imports)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    requests_refilled_at = models.FloatField(default=0)
    heavy_refilled_at = models.FloatField(default=0)
    throttled_total = models.PositiveBigIntegerField(default=0)

    def __str__(self):
        return f"dashboard budget of {self.user}"


class DashboardPreferences(models.Model):
    """What a member of the dashboard left open: the session page's folded panels (metadata, trace,
    what-if, the size chart, as-of, the request timeline), remembered per user across pages and devices
    (sessions/dashboard/preferences.py)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="dashboard_preferences")
    open_panels = models.JSONField(default=list, blank=True)  # names of sessions.dashboard.preferences.PANELS

    def __str__(self):
        return f"dashboard preferences of {self.user_id}"
