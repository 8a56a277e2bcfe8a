"""The model input of a session, in the format asked for, with its ETag; and counting the tokens of a
message list."""

import json
from typing import Literal

import orjson
from django.http import HttpResponse, HttpResponseNotModified
from django.utils.http import parse_etags
from ninja import Query, Router
from ninja.renderers import JSONRenderer
from ninja.responses import NinjaJSONEncoder

from sessions.context.model_input import (
    TEXT_AS_STORED_FORMATS,
    build_model_input,
    check_as_of,
    latest_checkpoint,
    model_input_tag,
)
from sessions.context.provider_input import model_input_response, stored_openai_response
from sessions.context.recorded_input import RECORDED_REQUEST, build_recorded_input, check_basis
from sessions.http import schemas as s
from sessions.http.common import ERRORS, link, links, project
from sessions.ingest.session_store import get_session
from sessions.wire.ctxweb import StoredText
from sessions.wire.validation import count_openai_messages

router = Router(tags=["sessions"])


def matches(if_none_match: str, tag: str) -> bool:
    """If-None-Match against our tag, compared weakly (RFC 9110 13.1.2)."""
    tags = parse_etags(if_none_match)
    return "*" in tags or any(t.removeprefix("W/") == tag for t in tags)


@router.get("/sessions/{key}/model-input", response={200: s.ModelInputOut, 304: None, **ERRORS, 409: s.ErrorOut},
            summary="The model input: what the application sent (sessions rebuilt from recorded requests), or the "
                    "latest checkpoint plus the messages after it",
            description="Answers with an ETag of the session's state; sent back in If-None-Match, an unchanged "
                        "input is answered 304 with no body, without building it. `basis` in the answer says where "
                        "it comes from.",
            openapi_extra=links(200, CountTokens=link("count_tokens", {"messages": "$response.body#/messages"})))
def model_input(
    request, response: HttpResponse, key: str, format: s.FormatName = "ctxweb",
    as_of: int | None = Query(None, ge=0, le=2_000_000_000),
    basis: Literal["recorded_request", "raw_log"] | None = Query(None, description=(
        "recorded_request: what the application sent (the default of a session rebuilt from recorded requests); "
        "raw_log: what ctxweb builds from the raw log by its own rules (the default of every other session)")),
):
    session = get_session(project(request), key)
    check_as_of(session, as_of)
    basis = check_basis(session, basis)
    tag = model_input_tag(session, format, as_of, basis)
    # Per API key, and to be asked again each time: the tag, not an age, says whether it is still good.
    headers = {"ETag": tag, "Cache-Control": "private, no-cache", "Vary": "Authorization"}
    if matches(request.headers.get("If-None-Match", ""), tag):
        return HttpResponseNotModified(headers=headers)
    for name, value in headers.items():
        response[name] = value
    # A session never compacted has no checkpoint to look up: the count moves with every checkpoint stored,
    # and the tag above was made from the same row.
    if basis == RECORDED_REQUEST:
        return model_input_json(request, response, model_input_response(
            build_recorded_input(session, as_of=as_of), format))
    checkpoint = None if not session.checkpoint_count else False
    if format == "openai" and as_of is None and not session.request_count:  # its figures are of this basis
        checkpoint = checkpoint if checkpoint is None else latest_checkpoint(session)
        if (body := stored_openai_response(session, checkpoint)) is not None:
            return model_input_json(request, response, body)
    return model_input_json(request, response, model_input_response(
        build_model_input(session, as_of=as_of, checkpoint=checkpoint,
                          text_as_stored=format in TEXT_AS_STORED_FORMATS), format))


def model_input_json(request, response: HttpResponse, body: dict) -> HttpResponse:
    """The model input's response, as ninja would render it from ModelInputOut, without walking its
    messages through the schema: they are plain JSON values our renderers made (sessions/context/provider_input.py),
    which the schema takes as they are (a list of dicts of anything), and validating and dumping them
    again cost as much as serializing them. Every other field goes through the schema and the API's
    renderer (ninja's), in the schema's order; the messages are serialized by orjson (messages_json).
    tests/api/test_model_input.py compares the response with ninja's own rendering."""
    head = s.ModelInputOut.model_validate({**body, "messages": []}).model_dump()

    def field(name, value) -> bytes:
        value = messages_json(body["messages"]) if name == "messages" else render(value)
        return render(name) + b": " + value

    def render(value) -> bytes:
        return RENDERER.render(request, value, response_status=200).encode()

    response.content = b"{" + b", ".join(field(name, value) for name, value in head.items()) + b"}"
    return response


def messages_json(messages: list) -> bytes:
    """The model input's messages as JSON. orjson writes them about 15 times as fast as the standard
    library (a 727-message input: 0.07 against 1.0 ms), which was the largest step of a fetch after the
    read; it writes UTF-8 rather than \\u escapes, and no spaces. A string content read as stored
    (StoredText) goes in as the JSON text it is stored as. What orjson refuses (an integer past 64
    bits, a lone surrogate stored on SQLite) goes through the standard library, as before."""
    try:
        return orjson.dumps(messages, default=_as_stored)
    except orjson.JSONEncodeError:
        return json.dumps(messages, cls=_StoredTextEncoder).encode()


def _as_stored(value):
    if type(value) is StoredText:
        return orjson.Fragment(value.json)
    raise TypeError


RENDERER = JSONRenderer()


@router.post("/tokens", response={200: s.TokensOut, **ERRORS}, summary="Count tokens of an OpenAI-format message list")
def count_tokens(request, body: s.TokensIn):
    total, per_message = count_openai_messages(body.messages)
    return {"total": total, "messages": per_message}


class _StoredTextEncoder(NinjaJSONEncoder):
    def default(self, o):
        return json.loads(o.json) if type(o) is StoredText else super().default(o)
