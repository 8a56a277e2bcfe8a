"""A session rebuilt from recorded requests (sessions.ingest.recorded_requests.record_requests), for the tests of
the request timeline and its diffs: an application that keeps its whole history for three requests, then
replaces the first two turns with a summary of its own, then also trims its oldest remaining turn."""

from datetime import UTC, datetime, timedelta

from sessions.ingest.recorded_requests import CapturedRequest, record_requests
from sessions.models import RecordedRequest, Session

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
SYSTEM = {"role": "system", "content": "You are the support agent of Horizon Air."}
FIRST_QUESTION = "My order A-1001 arrived damaged; the box was crushed on one side."
SUMMARY = "Summary so far: the customer's order A-1001 arrived damaged <b>and</b> a refund was offered."
MODEL = "gpt-4o-mini"


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


U1, A1 = user(FIRST_QUESTION), assistant("I am sorry to hear that. I can offer a refund or a replacement.")
U2, A2 = user("A refund, please."), assistant("Done: the refund of 42.00 EUR is on its way.")
U3, A3 = user("When will I see it?"), assistant("Within five working days.")
U4, A4 = user("Can you also change my delivery address?"), assistant("Yes, what is the new address?")
U5, A5 = user("Rua Augusta 12, Lisbon."), assistant("Updated: Rua Augusta 12, Lisbon.")
SUMMARY_MESSAGE = user(SUMMARY)

# (messages sent, response, provider's input tokens)
REQUESTS = [
    ([SYSTEM, U1], A1, 41),
    ([SYSTEM, U1, A1, U2], A2, 72),
    ([SYSTEM, U1, A1, U2, A2, U3], A3, 95),
    # The application replaces the first two turns with its own summary: #1-#4 dropped, one own message.
    ([SYSTEM, SUMMARY_MESSAGE, U3, A3, U4], A4, None),
    # ... and trims the oldest turn it still had: #5 and #6 dropped; the summary is sent again.
    ([SYSTEM, SUMMARY_MESSAGE, U4, A4, U5], A5, 70),
]
DROPPED_IN_4 = [1, 2, 3, 4]
DROPPED_IN_5 = [5, 6]


def captured_requests(key: str = "rebuilt") -> list[CapturedRequest]:
    return [
        CapturedRequest(conversation=key, external_id=f"span-{n}", source="otlp", started_at=T0 + timedelta(minutes=n),
                        messages=messages, response=[response], model=MODEL, usage_input_tokens=usage,
                        usage_output_tokens=12)
        for n, (messages, response, usage) in enumerate(REQUESTS, start=1)
    ]


def rebuilt_session(project, key: str = "rebuilt") -> Session:
    result = record_requests(project, captured_requests(key), "test")
    assert result.stored == len(REQUESTS) and not result.rejected, result
    return Session.objects.get(project=project, key=key)


def orm_session(project, key: str = "orm-rebuilt", requests: int = 3) -> Session:
    """A session with RecordedRequest rows written directly, without a raw log: what the pages must
    survive when the rows name seqs the raw log lacks."""
    session = Session.objects.create(project=project, key=key, request_count=requests)
    for n in range(1, requests + 1):
        RecordedRequest.objects.create(
            session=session, number=n, external_id=f"orm-{n}", source="request_log",
            started_at=T0 + timedelta(minutes=n), model="",
            messages=[user(f"question {n}"), user(f"<script>alert({n})</script> own note {n}")],
            tokens=10 * n, usage_input_tokens=None if n == 2 else 11 * n,
            message_seqs=[2 * n - 1, None], unmatched=[1, 7],  # 7: out of range, ignored
            dropped_seqs=[2 * n - 3] if n > 1 else [],
        )
    return session
