"""GET /api/v1/sessions/{key}/trace?q=: where a string is in a session, and which summary lost it."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.api.conftest import assert_error

pytestmark = pytest.mark.django_db

ORDER_CHAT = [
    {"role": "user", "content": "My order W9609649 never arrived. I paid $84.50 for it."},
    {"role": "assistant", "content": None,
     "tool_calls": [{"id": "c1", "name": "find_order", "arguments": '{"order_id": "W9609649"}'}]},
    {"role": "tool", "tool_call_id": "c1", "content": '{"status": "shipped", "city": "Lisbon"}'},
    {"role": "assistant", "content": "Order W9609649 was shipped to Lisbon on 2024-05-03."},
    {"role": "user", "content": "Can you also check my seat on UA123?"},
    {"role": "assistant", "content": "Seat 14C on UA123 is confirmed."},
    {"role": "user", "content": "Thanks. Anything else I should know?"},
]


@pytest.fixture
def order_session(api):
    api.post("/sessions/order/messages", {"messages": ORDER_CHAT})
    return "order"


def compact(api, key, summary, keep=1):
    response = api.post(f"/sessions/{key}/compact", {"force": True, "keep_recent_tokens": keep, "summary": summary})
    assert response.status_code == 200, response.content
    return response.json()["checkpoint"]


def test_it_says_which_summary_lost_a_string_and_the_first_request_without_it(api, order_session):
    checkpoint = compact(api, "order", "The user asked about a late parcel and a seat.")
    request = api.post("/sessions/order/requests", {}).json()

    response = api.get("/sessions/order/trace", query={"q": "W9609649"})

    assert response.status_code == 200
    body = response.json()
    at = checkpoint["created_at_seq"]
    assert body["answer"] == (
        f"“W9609649” appears in #1, #2 and #4; they were covered by checkpoint {checkpoint['number']} (made after #{at}), whose "
        f"summary does not mention it, so no request after #{at} carried it (the first without it: request "
        f"{request['event_id']})."
    )
    assert [m["seq"] for m in body["messages"]] == [1, 2, 4]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "assistant"]
    assert all(not m["in_model_input"] and m["reason"] == "covered_by_checkpoint" for m in body["messages"])
    first = body["messages"][0]
    assert "<mark>" not in first["excerpt"]  # plain text: the offsets say where the match is
    assert [first["excerpt"][start:end] for start, end in first["matches"]] == ["W9609649"]
    assert "W9609649" in body["messages"][1]["excerpt"]  # found in the tool call's arguments
    assert body["messages"][0]["checkpoints"] == [
        {"id": checkpoint["id"], "number": checkpoint["number"], "last_seq": checkpoint["last_seq"], "created_at_seq": at, "carries": False,
         "added_back": False}]
    assert body["lost_at_checkpoint_id"] == checkpoint["id"]
    assert body["first_request"]["event_id"] == request["event_id"]
    assert body["first_request"]["checkpoint_id"] == checkpoint["id"]
    assert body["truncated"] is False


def test_a_summary_that_carries_the_string_keeps_it_for_the_model(api, order_session):
    checkpoint = compact(api, "order", "Order w9609649 was shipped to Lisbon; seat 14C on UA123.")
    api.post("/sessions/order/requests", {})

    body = api.get("/sessions/order/trace", query={"q": "W9609649"}).json()

    assert body["answer"].endswith(
        f"they were covered by checkpoint {checkpoint['number']} (made after #{checkpoint['created_at_seq']}), whose summary "
        "carries it, so the model still sees it in the summary.")
    assert body["messages"][0]["checkpoints"][0]["carries"] is True
    assert body["lost_at_checkpoint_id"] is None
    assert body["first_request"] is None


def test_a_later_checkpoint_that_drops_the_string_is_the_one_that_lost_it(api, order_session):
    first = compact(api, "order", "Order W9609649 was shipped to Lisbon.")
    api.post("/sessions/order/messages", {"messages": [
        {"role": "assistant", "content": "Nothing else, have a good day."},
        {"role": "user", "content": "Bye"}]})
    second = compact(api, "order", "Small talk about travel.")

    body = api.get("/sessions/order/trace", query={"q": "W9609649"}).json()

    assert body["answer"].endswith(
        f"covered by checkpoint {first['number']} (made after #{first['created_at_seq']}), whose summary carries it, but "
        f"checkpoint {second['number']} (made after #{second['created_at_seq']}) does not, so no request after "
        f"#{second['created_at_seq']} carried it.")
    assert [(c["id"], c["carries"]) for c in body["messages"][0]["checkpoints"]] == [
        (first["id"], True), (second["id"], False)]
    assert body["lost_at_checkpoint_id"] == second["id"]


def test_a_string_in_the_model_input_is_said_to_be_seen(api, order_session):
    body = api.get("/sessions/order/trace", query={"q": "ua123"}).json()

    assert body["answer"] == "“ua123” appears in #5 and #6; #5 and #6 are in the model input now, so the model sees it."
    assert [m["in_model_input"] for m in body["messages"]] == [True, True]
    assert body["messages"][0]["why"].startswith("In the model input, message ")


def test_a_star_stands_for_any_run_of_non_space_characters(api, order_session):
    body = api.get("/sessions/order/trace", query={"q": "W96*49"}).json()

    assert [m["seq"] for m in body["messages"]] == [1, 2, 4]
    assert [m["seq"] for m in api.get("/sessions/order/trace", query={"q": "W96* never"}).json()["messages"]] == [1]
    assert api.get("/sessions/order/trace", query={"q": "W96* shipped"}).json()["messages"] == []


def test_a_string_found_nowhere_says_so(api, order_session):
    body = api.get("/sessions/order/trace", query={"q": "Z0000000"}).json()

    assert body == {"query": "Z0000000", "answer": "“Z0000000” appears in no message of this session.",
                    "messages": [], "truncated": False, "lost_at_checkpoint_id": None, "first_request": None,
                    "fact_kind": "identifier", "pinned": None}


def test_a_hidden_message_never_reached_the_model(api, order_session):
    api.patch("/sessions/order/messages/6", {"include_in_messages": False})

    body = api.get("/sessions/order/trace", query={"q": "14C"}).json()

    assert body["answer"] == ("“14C” appears in #6, which never reached the model: hidden from the model input, or "
                              "stored system messages.")
    assert body["messages"][0]["reason"] == "excluded_flag"


def test_the_excerpt_is_the_plain_text_with_the_offsets_of_the_match(api):
    api.post("/sessions/xss/messages", {"messages": [
        {"role": "user", "content": "<script>alert(1)</script> order W1234567"}]})

    row = api.get("/sessions/xss/trace", query={"q": "W1234567"}).json()["messages"][0]

    # JSON carries the text as it is, no HTML entities; whoever shows it as HTML escapes it (the
    # dashboard does: tests/dashboard/test_trace.py).
    assert row["excerpt"] == "<script>alert(1)</script> order W1234567"
    assert "&lt;" not in row["excerpt"]
    assert [row["excerpt"][start:end] for start, end in row["matches"]] == ["W1234567"]


def test_it_lists_at_most_50_messages_and_says_when_more_hold_it(api):
    api.post("/sessions/many/messages", {"messages": [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"ticket T-{i} about order W5550001"}
        for i in range(60)]})

    body = api.get("/sessions/many/trace", query={"q": "W5550001"}).json()

    assert len(body["messages"]) == 50
    assert body["truncated"] is True
    assert body["answer"].startswith("“W5550001” appears in at least 50 messages, #1–#50;")


def test_the_search_reads_a_bounded_number_of_rows_in_the_database(api):
    api.post("/sessions/big/messages", {"messages": [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} W77{i:05}"} for i in range(400)]})

    with CaptureQueriesContext(connection) as queries:
        body = api.get("/sessions/big/trace", query={"q": "W7700123"}).json()

    assert [m["seq"] for m in body["messages"]] == [124]
    searches = [q["sql"] for q in queries.captured_queries if "LIMIT 51" in q["sql"]]
    assert len(searches) == 1
    assert len(queries.captured_queries) < 15


@pytest.mark.parametrize("q", ["", "*", "a", "**x", "x" * 201])
def test_it_rejects_a_query_it_cannot_trace_with_a_4xx(api, order_session, q):
    response = api.get("/sessions/order/trace", query={"q": q})

    assert 400 <= response.status_code < 500
    assert response.json()["code"] in ("invalid_query", "invalid_request", "validation_error"), response.json()


def test_it_needs_q(api, order_session):
    response = api.get("/sessions/order/trace")

    assert 400 <= response.status_code < 500


def test_another_projects_key_gets_404(other_api, order_session):
    body = assert_error(other_api.get("/sessions/order/trace", query={"q": "W9609649"}), 404, "session_not_found")

    assert "W9609649" not in str(body)


def test_the_trace_costs_the_same_queries_however_many_messages_hold_the_string(api):
    def queries_for(key, hits):
        api.post(f"/sessions/{key}/messages", {"messages": [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"{'order W4440001' if i < hits else 'other'} {i}"}
            for i in range(80)]})
        compact(api, key, "Nothing specific.", keep=1)
        api.post(f"/sessions/{key}/requests", {})
        with CaptureQueriesContext(connection) as queries:
            body = api.get(f"/sessions/{key}/trace", query={"q": "W4440001"}).json()
        assert len(body["messages"]) == hits
        return len(queries.captured_queries)

    assert queries_for("one", 1) == queries_for("forty", 40)


CODE_CHAT = [
    {"role": "user", "content": "Card ending 7312 was charged 2955.17 for the order."},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "name": "write_file", "arguments":
        '{"path": "cart.py", "body": "def total(items):\\n    return round(sum(i.price for i in items), 2)\\n"}'}]},
    {"role": "tool", "tool_call_id": "c1", "content": '{"last_four": "7312", "price": 2955.17, "city": "Zürich"}'},
    {"role": "assistant", "content": "Written.   It   rounds to cents."},
    {"role": "user", "content": "Thanks."},
]


@pytest.mark.parametrize(("query", "seqs", "kind"), [
    ("7312", [1, 3], "number"),  # a card's last four: a fact the checkpoint counts now
    ("2955.17", [1, 3], "number"),  # a price without its currency
    ("last_four", [3], None),  # a field name: found, but no fact
    ("Written. It rounds", [4], None),  # runs of spaces in the message, one in the query
    ("def total(items):\\n return", [2], None),  # as the arguments' JSON text writes it
    ("rounds to cents", [4], None),
    ("Zürich", [3], None),
])
def test_trace_finds_what_the_facts_of_a_checkpoint_are_made_of(api, query, seqs, kind):
    api.post("/sessions/code/messages", {"messages": CODE_CHAT})
    checkpoint = compact(api, "code", "The user asked about a charge.")

    body = api.get("/sessions/code/trace", query={"q": query}).json()

    assert [m["seq"] for m in body["messages"]] == seqs
    assert body["fact_kind"] == kind
    assert {c["carries"] for m in body["messages"] for c in m["checkpoints"]} == {False}
    lost = {fact["text"] for fact in checkpoint["lost"]}
    if kind:
        assert query in lost and body["lost_at_checkpoint_id"] == checkpoint["id"]


def test_the_match_is_marked_inside_a_longer_word(api):
    api.post("/sessions/card/messages", {"messages": [{"role": "user", "content": "Pay with credit_card_7447 please."}]})

    first = api.get("/sessions/card/trace", query={"q": "7447"}).json()["messages"][0]

    assert [first["excerpt"][start:end] for start, end in first["matches"]] == ["7447"]
