"""Sessions for the browser tests, built through the domain functions (append, update_session)."""

import json

from sessions.ingest.append import append_messages
from sessions.ingest.demo import call, long_run_messages
from sessions.ingest.session_store import update_session
from sessions.models import Session

ACTOR = "browser-test"
XSS = "<img src=x onerror=alert(1)><script>alert(2)</script>"
CITIES = ["Lisbon", "Porto", "Madrid", "Seville", "Bilbao"]


def session_url(base_url: str, key: str, project: str = "default") -> str:
    return f"{base_url}/p/{project}/s/{key}/"


def tool_jumps(project, key: str = "tool-jumps") -> Session:
    """An assistant message with five parallel tool calls (long arguments) and five long results, so a
    call and its result are far apart on the page. Seqs: 1 user, 2 assistant (calls), 3-7 results, 8."""
    calls = [
        call(f"call_w_{i}", "get_forecast", city=city, days=14,
             fields=[f"hourly_metric_{n:02d}" for n in range(30)])
        for i, city in enumerate(CITIES)
    ]
    results = [
        {"role": "tool", "tool_call_id": f"call_w_{i}", "name": "get_forecast",
         "content": json.dumps({"city": city, "days": [{"day": d, "high": 20 + d % 7, "low": 11 + d % 5,
                                                        "rain_mm": d % 3} for d in range(14)]}, indent=2)}
        for i, city in enumerate(CITIES)
    ]
    append_messages(project, key, [
        {"role": "user", "content": "Compare the two-week forecast for Lisbon, Porto, Madrid, Seville and Bilbao."},
        {"role": "assistant", "content": "I'll fetch all five forecasts in parallel.", "tool_calls": calls},
        *results,
        {"role": "assistant", "content": "Lisbon and Seville stay warmest; Bilbao gets the most rain."},
    ], ACTOR)
    return Session.objects.get(project=project, key=key)


def small_session(project, key: str = "live-1") -> Session:
    append_messages(project, key, [
        {"role": "user", "content": "Is the 9:40 train to Porto running today?"},
        {"role": "assistant", "content": "Let me check the timetable."},
        {"role": "user", "content": "Thanks, I'll wait."},
    ], ACTOR)
    return Session.objects.get(project=project, key=key)


def xss_session(project, key: str = "xss-1") -> Session:
    """Hostile text in a title, message text, an attribute, a tool call argument and a tool result."""
    update_session(project, key, {"title": XSS, "metadata": {"note": XSS}}, ACTOR)
    append_messages(project, key, [
        {"role": "user", "content": XSS, "attributes": {"comment": XSS}},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_x_1", "name": "lookup", "arguments": XSS}]},
        {"role": "tool", "tool_call_id": "call_x_1", "name": "lookup", "content": XSS},
        {"role": "assistant", "content": XSS},
    ], ACTOR)
    return Session.objects.get(project=project, key=key)


def long_session(project, key: str = "long-500", count: int = 500) -> Session:
    append_messages(project, key, long_run_messages(count), ACTOR)
    return Session.objects.get(project=project, key=key)


def support_session(project, phrase: str, at_seq: int, key: str = "support-ticket-9", count: int = 150) -> Session:
    """A long transcript where the user message `at_seq` (1-based, must be a user turn: 1, 5, 9…)
    contains `phrase`, far from the newest messages."""
    messages = long_run_messages(count)
    assert messages[at_seq - 1]["role"] == "user"
    messages[at_seq - 1] = {"role": "user", "content": f"Before the next batch: {phrase}. Can someone call me back?"}
    update_session(project, key, {"title": "Support ticket: lost luggage"}, ACTOR)
    append_messages(project, key, messages, ACTOR)
    return Session.objects.get(project=project, key=key)
