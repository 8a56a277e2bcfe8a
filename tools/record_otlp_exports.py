"""Record the OTLP exports in tests/data/otlp/: the conversations of tests/data/request-logs replayed through
the real `openai` client, instrumented by each OpenTelemetry instrumentation docs/capture-and-import.md names
(openinference-instrumentation-openai, opentelemetry-instrumentation-openai-v2), against an OpenAI-compatible
server on loopback that answers each request with the response the log recorded for it. The spans are
encoded as the OTLP/HTTP exporter encodes them (ExportTraceServiceRequest, protobuf) and written one file
per log and instrumentation, so the tests read what these producers really send.

    .venv/bin/python tools/record_otlp_exports.py

Run it again when an instrumentation's version changes; the files are committed."""

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
LOGS = sorted((ROOT / "tests" / "data" / "request-logs").glob("*.jsonl"))
OUT = ROOT / "tests" / "data" / "otlp"
KEPT_PARAMETERS = ("model", "tools", "temperature", "top_p")


def logged_requests(path: Path) -> list[tuple[list, dict, dict]]:
    """(messages sent, parameters, response message) of each request of a request log. A request retried
    before its response came is answered with the response its retry got."""
    requests, pending = [], None
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record.get("type") == "request":
            body = record.get("request_params") or record
            pending = (body["messages"], {k: body[k] for k in KEPT_PARAMETERS if k in body}, None)
            requests.append(pending)
        elif record.get("type") == "response" and pending is not None:
            output = (record.get("outputs") or [{}])[0]
            message = {"role": "assistant", "content": output.get("message") or None}
            if output.get("tool_calls"):
                message["tool_calls"] = output["tool_calls"]
            requests[-1] = (*requests[-1][:2], message)
    answers = [r[2] for r in requests]
    for i in range(len(answers) - 1, -1, -1):
        if answers[i] is None:
            answers[i] = answers[i + 1] if i + 1 < len(answers) else {"role": "assistant", "content": "Done."}
    return [(messages, parameters, answer) for (messages, parameters, _), answer in zip(requests, answers, strict=True)]


def record(instrumentation: str, path: Path) -> bytes:
    import openai
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tests.otlp.chat_server import ChatServer

    kept = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    if instrumentation == "openinference":
        from openinference.instrumentation import using_session
        from openinference.instrumentation.openai import OpenAIInstrumentor

        conversation = using_session(path.stem)
    else:
        os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
        os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        conversation = provider.get_tracer("replay").start_as_current_span(path.stem)
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with ChatServer() as server, conversation:
            client = openai.OpenAI(base_url=server.base_url, api_key="sk-replay")
            for messages, parameters, answer in logged_requests(path):
                server.answers.append(answer)
                client.chat.completions.create(messages=messages, **{"model": "gpt-test", **parameters})
    finally:
        instrumentor.uninstrument()
    spans = [s for s in kept.get_finished_spans() if s.attributes and len(s.attributes) > 2]
    return encode_spans(spans).SerializeToString()


def main() -> None:
    OUT.mkdir(exist_ok=True)
    instrumentation = sys.argv[1] if len(sys.argv) > 1 else None
    if instrumentation is None:  # each instrumentation in a process of its own: they patch the same client
        for name in ("openinference", "genai"):
            os.spawnv(os.P_WAIT, sys.executable, [sys.executable, __file__, name])
        return
    for path in LOGS:
        target = OUT / f"{instrumentation}-{path.stem}.pb"
        target.write_bytes(record(instrumentation, path))
        print(f"wrote {target.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
