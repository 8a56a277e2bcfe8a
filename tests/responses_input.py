"""Whether an OpenAI Responses API `input` list is one the API takes, checked strictly against the typed
params of the `openai` package: the whole list as `ResponseInputParam`, and every item and content part
against the one TypedDict it claims to be, with no key that TypedDict does not declare (pydantic alone
ignores unknown keys of a TypedDict) and every required key present."""

from functools import cache

from openai.types.responses import (
    EasyInputMessageParam,
    ResponseFunctionToolCallParam,
    ResponseInputImageContentParam,
    ResponseInputImageParam,
    ResponseInputParam,
    ResponseInputTextContentParam,
    ResponseInputTextParam,
)
from openai.types.responses.response_input_param import FunctionCallOutput
from pydantic import TypeAdapter, ValidationError

ITEMS = {
    "message": EasyInputMessageParam,
    "function_call": ResponseFunctionToolCallParam,
    "function_call_output": FunctionCallOutput,
}
MESSAGE_PARTS = {"input_text": ResponseInputTextParam, "input_image": ResponseInputImageParam}
OUTPUT_PARTS = {"input_text": ResponseInputTextContentParam, "input_image": ResponseInputImageContentParam}


@cache
def adapter(typed) -> TypeAdapter:
    return TypeAdapter(typed)


def typed_problems(typed_dict, value, where: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{where}: not an object"]
    declared = typed_dict.__required_keys__ | typed_dict.__optional_keys__
    problems = [f"{where}: {key!r} is not a field of {typed_dict.__name__}" for key in value if key not in declared]
    problems += [f"{where}: {key!r} is required by {typed_dict.__name__}" for key in typed_dict.__required_keys__
                 if key not in value]
    try:
        adapter(typed_dict).validate_python(value, strict=True)
    except ValidationError as exc:
        problems.append(f"{where}: {exc}")
    return problems


def parts_problems(content, kinds: dict, where: str) -> list[str]:
    if isinstance(content, str):
        return []
    if not isinstance(content, list):
        return [f"{where}: neither a string nor a list of parts"]
    problems = []
    for n, part in enumerate(content):
        typed_dict = kinds.get(part.get("type")) if isinstance(part, dict) else None
        if typed_dict is None:
            problems.append(f"{where}[{n}]: not one of {', '.join(kinds)}")
        else:
            problems += typed_problems(typed_dict, part, f"{where}[{n}]")
    return problems


def responses_input_problems(items: list) -> list[str]:
    """Why `items` would not be a valid `input`, or []. Beyond the types: an assistant message's content is
    a string (the API takes output parts only with a response's id and status); every
    function_call_output answers an earlier function_call, once; a function_call may go unanswered only
    when no message follows it (the newest assistant's pending calls); no reasoning item."""
    try:
        adapter(ResponseInputParam).validate_python(items)
    except ValidationError as exc:
        return [f"not a ResponseInputParam: {exc}"]
    problems: list[str] = []
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, item in enumerate(items):
        where = f"input[{i}]"
        typed_dict = ITEMS.get(item.get("type"))
        if typed_dict is None:
            problems.append(f"{where}: an item of type {item.get('type')!r}")
            continue
        problems += typed_problems(typed_dict, item, where)
        if item["type"] == "message":
            if item["role"] == "assistant" and not isinstance(item["content"], str):
                problems.append(f"{where}: an assistant message with parts")
            problems += parts_problems(item["content"], MESSAGE_PARTS, f"{where}.content")
            unanswered = [call_id for call_id in calls if call_id not in answered]
            if unanswered:
                problems.append(f"{where}: a message after the unanswered calls {unanswered}")
        elif item["type"] == "function_call":
            if item["call_id"] in calls and item["call_id"] not in answered:
                problems.append(f"{where}: call id {item['call_id']!r} reused while unanswered")
            calls[item["call_id"]] = i
            answered.discard(item["call_id"])
        else:
            problems += parts_problems(item["output"], OUTPUT_PARTS, f"{where}.output")
            if item["call_id"] not in calls or item["call_id"] in answered:
                problems.append(f"{where}: answers no open call ({item['call_id']!r})")
            answered.add(item["call_id"])
    return problems
