"""The model input rendered for a provider: ctxweb's own shape, OpenAI Chat Completions, Anthropic Messages."""

import json
import re

from .model_input import ModelInput
from .models import Role
from .tokens import provider_role

DATA_URL_RE = re.compile(r"^data:([\w.+-]+/[\w.+-]+)?(?:;[\w=.+-]+)*;base64,(.*)$", re.IGNORECASE | re.DOTALL)
FORMATS = ("ctxweb", "openai", "anthropic")


def to_ctxweb(model_input: ModelInput) -> list[dict]:
    out = []
    for entry in model_input.entries:
        item = {"kind": entry.kind, "role": entry.role, "content": entry.content, "tokens": entry.tokens}
        if entry.seq is not None:
            item["seq"] = entry.seq
        if entry.client_id:
            item["id"] = entry.client_id
        if entry.tool_calls:
            item["tool_calls"] = entry.tool_calls
        if entry.dropped_calls:
            item["dropped_tool_calls"] = entry.dropped_calls
        if entry.tool_call_id:
            item["tool_call_id"] = entry.tool_call_id
        if entry.name:
            item["name"] = entry.name
        if entry.checkpoint is not None:
            item["checkpoint_id"] = entry.checkpoint.pk
        out.append(item)
    return out


def _openai_content(content, role: str):
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if part["type"] == "text":
            parts.append({"type": "text", "text": part["text"]})
        elif role == Role.TOOL:  # tool results carry text only
            parts.append({"type": "text", "text": f"[image: {_short_url(part['url'])}]"})
        else:
            image = {"url": part["url"]}
            if part.get("detail"):
                image["detail"] = part["detail"]
            parts.append({"type": "image_url", "image_url": image})
    return parts


def _short_url(url: str) -> str:
    return url if len(url) <= 80 else url[:77] + "..."


def to_openai(model_input: ModelInput) -> list[dict]:
    out = []
    for entry in model_input.entries:
        role = provider_role(entry.role)
        message = {"role": role}
        if role == Role.ASSISTANT and entry.tool_calls:
            content = _openai_content(entry.content, role)
            message["content"] = content if content else None
            message["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in entry.tool_calls
            ]
        else:
            message["content"] = _openai_content(entry.content, role)
        if role == Role.TOOL:
            message["tool_call_id"] = entry.tool_call_id
        elif entry.name:
            message["name"] = entry.name
        out.append(message)
    return out


def _anthropic_blocks(content) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content.strip() else []
    blocks = []
    for part in content:
        if part["type"] == "text":
            if part["text"].strip():
                blocks.append({"type": "text", "text": part["text"]})
            continue
        match = DATA_URL_RE.match(part["url"])
        if match:
            media_type = part.get("media_type") or match.group(1) or "image/png"
            blocks.append(
                {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": match.group(2)}}
            )
        else:
            blocks.append({"type": "image", "source": {"type": "url", "url": part["url"]}})
    return blocks


def _arguments_object(arguments: str):
    try:
        value = json.loads(arguments) if arguments else {}
    except ValueError:
        return {"arguments": arguments}
    return value if isinstance(value, dict) else {"arguments": value}


def to_anthropic(model_input: ModelInput) -> dict:
    """Anthropic Messages: instructions in `system`; tool calls and results as tool_use/tool_result
    blocks; consecutive messages of one role merged, so roles alternate."""
    system_parts = []
    messages: list[dict] = []
    for entry in model_input.entries:
        if entry.kind == "instructions":
            system_parts.append(entry.content)
            continue
        role = provider_role(entry.role)
        if role == Role.TOOL:
            blocks = _anthropic_blocks(entry.content) if isinstance(entry.content, list) else None
            result = {"type": "tool_result", "tool_use_id": entry.tool_call_id}
            if blocks is None:
                result["content"] = entry.content
            else:
                result["content"] = blocks
            role, blocks = "user", [result]
        elif role == Role.ASSISTANT:
            blocks = _anthropic_blocks(entry.content)
            blocks += [
                {"type": "tool_use", "id": c["id"], "name": c["name"], "input": _arguments_object(c["arguments"])}
                for c in entry.tool_calls
            ]
        else:
            role, blocks = "user", _anthropic_blocks(entry.content)
        if not blocks:
            continue
        if messages and messages[-1]["role"] == role:
            # Validity already placed every tool result right after its call, so merging keeps the
            # results first in the user message that follows a tool_use.
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    result = {"messages": messages}
    if system_parts:
        result["system"] = "\n\n".join(system_parts)
    return result


def render(model_input: ModelInput, fmt: str):
    if fmt == "openai":
        return to_openai(model_input)
    if fmt == "anthropic":
        return to_anthropic(model_input)
    return to_ctxweb(model_input)
