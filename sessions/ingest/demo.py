"""Demo data: sessions that show every feature of the product, built through the real domain code
(append, compaction), so the demo's event history is real."""

import base64
import json
import struct
import zlib
from datetime import UTC, datetime, timedelta

from django.test import override_settings

from sessions.context.compaction_runs import compact
from sessions.ingest.append import append_messages
from sessions.ingest.recorded_requests import CapturedRequest, record_requests
from sessions.ingest.session_store import update_session
from sessions.models import Project, Session

ACTOR = "demo"
AIRLINE_INSTRUCTIONS = (
    "You are the support agent of Horizon Air. Verify the customer's identity before changing a "
    "booking, list the exact changes and get an explicit yes before you call a tool that writes."
)


def tiny_png(width: int = 96, height: int = 64) -> str:
    """A small gradient PNG as a data: URL, made here so the demo needs no files."""
    rows = b"".join(
        b"\x00" + b"".join(bytes((x * 255 // width, y * 255 // height, 180)) for x in range(width))
        for y in range(height)
    )

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows, 9))
        + chunk(b"IEND", b"")
    )
    return "data:image/png;base64," + base64.b64encode(png).decode()


def call(call_id, name, **arguments):
    return {"id": call_id, "name": name, "arguments": json.dumps(arguments)}


def airline_turns() -> list[dict]:
    """A support conversation with identity checks, lookups, a booking change and small talk."""
    m = []
    m.append({"role": "system", "content": "(stored by the old client) You are a helpful airline agent."})
    m.append({"role": "user", "content": "Hi, I need to move my flight to Seattle to a later date.",
              "attributes": {"channel": "web", "customer_id": "mia_li_3668"}})
    m.append({"role": "assistant", "content": "I can help with that. What is your user ID?"})
    m.append({"role": "user", "content": "It's mia_li_3668."})
    m.append({"role": "assistant", "content": None,
              "tool_calls": [call("call_user_1", "get_user_details", user_id="mia_li_3668")]})
    m.append({"role": "tool", "tool_call_id": "call_user_1", "name": "get_user_details",
              "content": json.dumps({"name": "Mia Li", "membership": "gold", "reservations": ["NO6JO3", "AIXC7Q"],
                                     "payment_methods": {"credit_card_7447": {"brand": "visa", "last_four": "7447"}}})})
    m.append({"role": "assistant", "content": "Thanks Mia. I see two reservations, NO6JO3 and AIXC7Q. Which one do you want to change?"})
    m.append({"role": "user", "content": "NO6JO3, the one from JFK to SEA on May 20."})
    m.append({"role": "assistant", "content": None,
              "tool_calls": [call("call_res_1", "get_reservation_details", reservation_id="NO6JO3")]})
    m.append({"role": "tool", "tool_call_id": "call_res_1", "name": "get_reservation_details",
              "content": json.dumps({"reservation_id": "NO6JO3", "origin": "JFK", "destination": "SEA",
                                     "flights": [{"flight_number": "HAT069", "date": "2024-05-20", "price": 121}],
                                     "cabin": "economy", "insurance": "no"})})
    m.append({"role": "assistant", "content": "Reservation NO6JO3: HAT069 JFK→SEA on 2024-05-20, economy. Which date would you like instead?"})
    m.append({"role": "user", "content": "May 22, and nothing before 11 AM please."})
    m.append({"role": "assistant", "content": None,
              "tool_calls": [call("call_search_1", "search_direct_flight", origin="JFK", destination="SEA", date="2024-05-22")]})
    m.append({"role": "tool", "tool_call_id": "call_search_1", "name": "search_direct_flight",
              "content": json.dumps([
                  {"flight_number": "HAT083", "departure": "01:00", "price": 109, "seats": 4},
                  {"flight_number": "HAT121", "departure": "13:30", "price": 138, "seats": 9},
                  {"flight_number": "HAT245", "departure": "18:10", "price": 152, "seats": 2}])})
    m.append({"role": "assistant", "content": "On May 22 there are two flights after 11 AM: HAT121 at 13:30 ($138) and HAT245 at 18:10 ($152). The change costs the fare difference."})
    m.append({"role": "user", "content": "HAT121 please. Use the card ending 7447."})
    m.append({"role": "assistant", "content": "To confirm: change NO6JO3 from HAT069 (May 20) to HAT121 (May 22, 13:30), economy, and charge $17 to the Visa ending 7447. Shall I proceed (yes/no)?"})
    m.append({"role": "user", "content": "yes"})
    m.append({"role": "assistant", "content": None,
              "tool_calls": [call("call_update_1", "update_reservation_flights", reservation_id="NO6JO3",
                                  cabin="economy", flights=[{"flight_number": "HAT121", "date": "2024-05-22"}],
                                  payment_id="credit_card_7447")]})
    m.append({"role": "tool", "tool_call_id": "call_update_1", "name": "update_reservation_flights",
              "content": json.dumps({"reservation_id": "NO6JO3", "status": "updated", "charged": 17})})
    m.append({"role": "assistant", "content": "Done: NO6JO3 is now on HAT121, May 22 at 13:30. $17 was charged to the Visa ending 7447."})
    m.append({"role": "user", "content": "Great. Can I also add a checked bag?",
              "attributes": {"channel": "web", "customer_id": "mia_li_3668", "trace_id": "tr-91c2"}})
    m.append({"role": "agent", "content": "Policy reminder injected by the app: gold members get 3 free checked bags per passenger."})
    m.append({"role": "assistant", "content": "As a gold member you have 3 free checked bags. How many would you like on NO6JO3?"})
    m.append({"role": "user", "content": "Just one. And please note my phone is 555-0100.",
              "attributes": {"pii": "phone number redacted from the model input"}})
    m.append({"role": "user", "content": "(internal) customer shared a phone number; hidden from the model.",
              "include_in_messages": False, "attributes": {"note": "hidden by the support app"}})
    m.append({"role": "assistant", "content": None,
              "tool_calls": [call("call_bags_1", "update_reservation_baggages", reservation_id="NO6JO3",
                                  total_baggages=1, nonfree_baggages=0, payment_id="credit_card_7447")]})
    m.append({"role": "tool", "tool_call_id": "call_bags_1", "name": "update_reservation_baggages",
              "content": json.dumps({"reservation_id": "NO6JO3", "total_baggages": 1, "status": "updated"})})
    m.append({"role": "assistant", "content": "One checked bag is added to NO6JO3, free of charge. Anything else?"})
    m.append({"role": "user", "content": "What's the weather going to be in Seattle when I land?"})
    m.append({"role": "assistant", "content": "I can only help with bookings, so I can't check the weather. Is there anything else about your trip?",
              "reasoning": "Weather is out of scope for the airline policy; decline politely."})
    m.append({"role": "user", "content": "No, that's all. Thanks!"})
    m.append({"role": "assistant", "content": "You're welcome, Mia. Have a good flight on May 22!"})
    return m


def tools_turns() -> list[dict]:
    """Parallel tool calls, an image, reasoning, an agent continuation, an unanswered call and a
    result whose call was hidden."""
    image = tiny_png()
    return [
        {"role": "user", "content": [
            {"type": "text", "text": "Here is a photo of the departures board. Is my flight to Lisbon on time, and what's the weather there and in Porto?"},
            {"type": "image", "url": image, "media_type": "image/png", "width": 96, "height": 64}],
         "attributes": {"user_id": "u_1842", "app_version": "3.4.1"}},
        {"role": "assistant", "content": "Let me check the board and both forecasts.",
         "reasoning": "The board shows TP1351 to Lisbon. Two independent lookups: run them in parallel.",
         "tool_calls": [call("call_w_lis", "get_weather", city="Lisbon"), call("call_w_opo", "get_weather", city="Porto"),
                        call("call_fs_1", "flight_status", flight="TP1351")]},
        {"role": "tool", "tool_call_id": "call_w_lis", "name": "get_weather", "content": "Lisbon: 24°C, sunny, wind 12 km/h"},
        {"role": "tool", "tool_call_id": "call_w_opo", "name": "get_weather", "content": "Porto: 19°C, light rain"},
        {"role": "tool", "tool_call_id": "call_fs_1", "name": "flight_status", "content": "TP1351 LHR→LIS: on time, gate B32, boarding 14:05"},
        {"role": "assistant", "content": "TP1351 to Lisbon is on time (gate B32, boarding 14:05). Lisbon: 24°C and sunny. Porto: 19°C with light rain."},
        {"role": "agent", "content": "Continuation: the app asks the assistant to offer a gate reminder."},
        {"role": "assistant", "content": "Would you like a reminder 15 minutes before boarding?"},
        {"role": "user", "content": "Sure. Also book me a taxi in Lisbon."},
        {"role": "assistant", "content": None, "tool_calls": [call("call_taxi_1", "book_taxi", city="Lisbon", time="16:30")]},
        {"role": "user", "content": "Actually, never mind the taxi, I'll take the metro."},
        {"role": "assistant", "content": "No problem, the taxi is not booked. Your reminder is set for 13:50."},
        {"role": "assistant", "content": None, "include_in_messages": False,
         "tool_calls": [call("call_audit_1", "audit_log", event="reminder_set")]},
        {"role": "tool", "tool_call_id": "call_audit_1", "name": "audit_log", "content": "logged"},
        {"role": "user", "content": "Thanks! What's the metro line from the airport?"},
        {"role": "assistant", "content": "Let me look that up.", "tool_calls": [call("call_metro_1", "transit_lookup", origin="LIS airport", destination="city centre")]},
    ]


TURN_SIZE = 4  # messages in each turn of long_run_messages


def long_run_messages(count: int) -> list[dict]:
    """A long agent run: many short turns (TURN_SIZE messages) with a tool call each."""
    messages = []
    i = 0
    while len(messages) < count:
        i += 1
        messages += [
            {"role": "user", "content": f"Step {i}: check the status of job batch-{i:05d} and tell me if it needs a retry."},
            {"role": "assistant", "content": None, "tool_calls": [call(f"call_job_{i}", "job_status", job=f"batch-{i:05d}")]},
            {"role": "tool", "tool_call_id": f"call_job_{i}", "name": "job_status",
             "content": json.dumps({"job": f"batch-{i:05d}", "state": "failed" if i % 7 == 0 else "succeeded",
                                    "duration_s": 30 + i % 90, "error": "timeout contacting storage" if i % 7 == 0 else None})},
            {"role": "assistant", "content": (f"batch-{i:05d} failed with a storage timeout; I recommend a retry."
                                              if i % 7 == 0 else f"batch-{i:05d} succeeded in {30 + i % 90}s; no retry needed.")},
        ]
    return messages[:count]


def append_long_run(project: Project, key: str, messages: list[dict]) -> None:
    """Store a long run as an agent would, with automatic compaction on: each compaction is done as soon
    as an append takes the input over max_tokens (here, as a worker would), before the next turn, so the
    input crosses max_tokens by at most one turn before it drops. The turns that surely fit under
    max_tokens go in one append: the chart draws the same straight climb with a sixth of the appends."""
    from sessions.context.compaction_runs import run_compaction

    turns = [messages[start:start + TURN_SIZE] for start in range(0, len(messages), TURN_SIZE)]
    session = Session.objects.get(project=project, key=key)
    largest_turn = 0  # tokens of the largest turn stored so far
    done = 0
    while done < len(turns):
        room = session.compaction_settings().max_tokens - session.input_tokens
        fit = room // largest_turn - 1 if largest_turn else 1
        batch = turns[done:done + max(1, fit)]
        result = append_messages(project, key, [m for turn in batch for m in turn], ACTOR)
        done += len(batch)
        sizes = [sum(m.tokens for m in result.messages[i:i + TURN_SIZE]) for i in range(0, len(result.messages), TURN_SIZE)]
        largest_turn = max(largest_turn, *sizes)
        if result.compaction is not None:  # the append enqueued it: done here, as a worker would
            run_compaction.call(result.compaction.pk)
        session = Session.objects.get(pk=session.pk)


def trimming_app_requests(key: str = "shop-assistant-trims") -> list[CapturedRequest]:
    """Six requests of an application that manages its own context, as an OpenTelemetry exporter would
    hand them over: it keeps the whole history at first, then replaces the oldest turns with a summary
    of its own, then trims that history to its last turn. The provider reports usage except once."""
    system = {"role": "system", "content": "You are the shopping assistant of the Acme store."}
    turns = [
        ({"role": "user", "content": "I ordered the Studio headphones (order A-77812) but they arrived with a cracked headband."},
         {"role": "assistant", "content": "Sorry about that! I can refund the $149 or send a replacement. Which do you prefer?"}),
        ({"role": "user", "content": "A replacement, please. Same colour, matte black."},
         {"role": "assistant", "content": "Done: a matte black replacement ships tomorrow; the courier takes the broken pair."}),
        ({"role": "user", "content": "Can it go to my office instead? Rua Augusta 12, Lisbon."},
         {"role": "assistant", "content": "Updated: the replacement goes to Rua Augusta 12, Lisbon."}),
        ({"role": "user", "content": "What time will the courier come?"},
         {"role": "assistant", "content": "Between 9:00 and 13:00; you will get a text an hour before."}),
        ({"role": "user", "content": "And do I need to pack the broken pair?"},
         {"role": "assistant", "content": "No box needed: the courier brings a padded bag."}),
        ({"role": "user", "content": "Great, thanks!"},
         {"role": "assistant", "content": "You're welcome. Enjoy the new headphones!"}),
    ]
    summary = {"role": "user", "content": "Summary of the conversation so far: order A-77812, Studio headphones "
                                          "with a cracked headband; a matte black replacement was agreed."}
    history = lambda n: [m for turn in turns[:n] for m in turn]  # noqa: E731 - the first n turns, whole
    sent = [
        [system, *history(0), turns[0][0]],
        [system, *history(1), turns[1][0]],
        [system, *history(2), turns[2][0]],
        # The application replaces its first two turns with a summary of its own...
        [system, summary, *turns[2], turns[3][0]],
        [system, summary, *turns[2], *turns[3], turns[4][0]],
        # ... then keeps only the summary and the last turn.
        [system, summary, *turns[4], turns[5][0]],
    ]
    usage = [52, 88, 121, None, 131, 98]
    start = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    return [
        CapturedRequest(conversation=key, external_id=f"demo-span-{n}", source="otlp",
                        started_at=start + timedelta(seconds=40 * n), messages=messages, response=[turns[n][1]],
                        model="gpt-4o-mini", provider="openai", usage_input_tokens=usage[n], usage_output_tokens=24)
        for n, messages in enumerate(sent)
    ]


def load_demo(stdout=None) -> bool:
    """Create the demo sessions unless they exist. Returns False when already loaded."""
    project = Project.objects.get_or_create(name="default", defaults={"title": "Default project"})[0]
    if Session.objects.filter(project=project, key="airline-support-42").exists():
        return False

    def say(text):
        if stdout is not None:
            stdout.write(text)

    say("Creating demo session airline-support-42 (two checkpoints made by the compaction engine)…")
    update_session(project, "airline-support-42", {
        "title": "Airline support: move a flight, add a bag",
        "metadata": {"customer": "mia_li_3668", "channel": "web", "model": "gpt-4o"},
        "instructions": AIRLINE_INSTRUCTIONS,
        "compaction": {"max_tokens": 900, "keep_recent_tokens": 350, "auto": False},
    }, ACTOR)
    turns = airline_turns()
    key = "airline-support-42"
    append_messages(project, key, turns[:15], ACTOR)
    session = Session.objects.get(project=project, key=key)
    compact(session, force=True, actor=ACTOR)
    append_messages(project, key, turns[15:28], ACTOR)
    compact(session, force=True, actor=ACTOR)
    append_messages(project, key, turns[28:], ACTOR)

    say("Creating demo session travel-assistant-7 (parallel tool calls, image, hidden and dropped messages)…")
    update_session(project, "travel-assistant-7", {
        "title": "Travel assistant: flight status and weather",
        "metadata": {"user_id": "u_1842", "model": "gpt-4o-mini"},
        "instructions": "You are a travel assistant. Use tools for live data; never guess gate numbers.",
        "compaction": {"max_tokens": 4000, "keep_recent_tokens": 1500},
    }, ACTOR)
    append_messages(project, "travel-assistant-7", tools_turns(), ACTOR)

    say("Creating demo sessions for skipped and failed compactions…")
    update_session(project, "greeting-only", {"title": "Too small to compact (not_smaller)"}, ACTOR)
    append_messages(project, "greeting-only", [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "bye"}, {"role": "assistant", "content": "Bye!"},
    ], ACTOR)
    compact(Session.objects.get(project=project, key="greeting-only"), force=True, keep_recent_tokens=1, actor=ACTOR)

    update_session(project, "one-long-turn", {"title": "One oversized turn (nothing_to_compact)"}, ACTOR)
    append_messages(project, "one-long-turn", [
        {"role": "user", "content": "Refactor the payment module and run the tests."},
        *[
            item
            for n in range(1, 6)
            for item in (
                {"role": "assistant", "content": f"Running step {n}.", "tool_calls": [call(f"call_sh_{n}", "bash", command=f"pytest -k step{n}")]},
                {"role": "tool", "tool_call_id": f"call_sh_{n}", "content": f"step {n}: 42 passed in 3.1s"},
            )
        ],
    ], ACTOR)
    compact(Session.objects.get(project=project, key="one-long-turn"), force=True, max_tokens=50, keep_recent_tokens=10, actor=ACTOR)

    update_session(project, "summarizer-down", {"title": "LLM summarizer unreachable (failed compaction)"}, ACTOR)
    append_messages(project, "summarizer-down", airline_turns()[1:20], ACTOR)
    with override_settings(CTXWEB_OPENAI_BASE_URL="http://127.0.0.1:9/v1", CTXWEB_OPENAI_TIMEOUT=2.0):
        compact(Session.objects.get(project=project, key="summarizer-down"), force=True, keep_recent_tokens=200,
                summarizer="openai", actor=ACTOR)

    count = 5200
    say(f"Creating demo session long-agent-run ({count} messages, compacted automatically as it grows)…")
    update_session(project, "long-agent-run", {
        "title": "Long agent run: nightly batch triage",
        "metadata": {"pipeline": "nightly", "model": "gpt-4o"},
        "instructions": "You triage batch jobs. Check each job's status and recommend retries for failures.",
        "compaction": {"max_tokens": 6000, "keep_recent_tokens": 2000, "auto": True},
    }, ACTOR)
    append_long_run(project, "long-agent-run", long_run_messages(count))

    say("Creating demo session shop-assistant-trims (rebuilt from six recorded requests; the application "
        "drops and summarizes turns itself)…")
    record_requests(project, trimming_app_requests(), ACTOR)
    update_session(project, "shop-assistant-trims", {
        "title": "Shop assistant that trims its own history", "metadata": {"source": "OpenTelemetry", "model": "gpt-4o-mini"},
    }, ACTOR)

    say("Creating project support-bots with two sessions…")
    bots = Project.objects.get_or_create(name="support-bots", defaults={"title": "Support bots"})[0]
    update_session(bots, "refund-bot-311", {
        "title": "Refund bot: damaged headphones",
        "metadata": {"order": "A-77812", "channel": "chat"},
        "instructions": "You handle refunds for the Acme store. Refunds over $200 need a human.",
    }, ACTOR)
    append_messages(bots, "refund-bot-311", [
        {"role": "user", "content": "My headphones arrived with a cracked headband. Order A-77812."},
        {"role": "assistant", "content": None, "tool_calls": [call("call_order_1", "get_order", order_id="A-77812")]},
        {"role": "tool", "tool_call_id": "call_order_1", "name": "get_order",
         "content": json.dumps({"order_id": "A-77812", "item": "Studio headphones", "price": 149.0, "delivered": "2026-11-20"})},
        {"role": "assistant", "content": "Sorry about that! The headphones cost $149, so I can refund you right away. Do you want a refund or a replacement?"},
        {"role": "user", "content": "A refund please. I'd also like to report the courier, the box was soaked."},
        {"role": "assistant", "content": None, "tool_calls": [call("call_refund_1", "issue_refund", order_id="A-77812", amount=149.0)]},
        {"role": "tool", "tool_call_id": "call_refund_1", "name": "issue_refund", "content": json.dumps({"status": "refunded", "amount": 149.0})},
        {"role": "assistant", "content": "Your refund of $149 is on its way (3-5 business days). I have noted the courier problem for our logistics team."},
    ], ACTOR)
    update_session(bots, "warranty-bot-12", {"title": "Warranty bot: laptop battery"}, ACTOR)
    append_messages(bots, "warranty-bot-12", [
        {"role": "user", "content": "My laptop battery drains in an hour. It's 14 months old."},
        {"role": "assistant", "content": "Laptops have a 24-month warranty, so the battery is covered. I'll open a warranty claim."},
    ], ACTOR)
    return True
