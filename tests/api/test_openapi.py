"""The OpenAPI schema at /api/v1/openapi.json: valid OpenAPI 3.1, and its links (which value of a response
feeds which next call) lead to operations that exist, set parameters those operations have, and take
values the source operation really has, of the type the target expects."""

import re

import pytest
import schemathesis
from django.test import Client

from tests.api.conftest import API, HOST

REQUEST_PATH = re.compile(r"\$request\.path\.(?P<name>\w+)")
RESPONSE_BODY = re.compile(r"\$response\.body#(?P<pointer>(/[\w-]+)*)")


@pytest.fixture(scope="module")
def document() -> dict:
    return Client(HTTP_HOST=HOST).get(f"{API}/openapi.json").json()


def operations(document: dict) -> dict[str, dict]:
    """Every operation by operationId, with its method and path."""
    return {
        operation["operationId"]: {**operation, "method": method, "path": path}
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    }


def all_links(document: dict):
    """(source operation, status, link name, link) for every link in the schema."""
    for operation in operations(document).values():
        for status, response in operation["responses"].items():
            for name, link in response.get("links", {}).items():
                yield operation, status, name, link


def dereference(document: dict, schema: dict) -> dict:
    while "$ref" in schema:
        target = document
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        schema = target
    return schema


def alternatives(document: dict, schema: dict) -> list[dict]:
    """The schemas a value of `schema` may match, with references followed and `anyOf` spread out."""
    schema = dereference(document, schema)
    if "anyOf" in schema:
        return [alt for option in schema["anyOf"] for alt in alternatives(document, option)]
    return [schema]


def schemas_at(document: dict, schema: dict, pointer: str) -> list[dict]:
    """The schemas of the value at a JSON pointer into a value of `schema`; empty when there is none."""
    found = alternatives(document, schema)
    for part in filter(None, pointer.split("/")):
        found = [
            alt
            for option in found
            for alt in alternatives(
                document,
                option["items"] if option.get("type") == "array" and part.isdigit()
                else option.get("properties", {}).get(part, {"not": {}}),
            )
            if alt != {"not": {}}
        ]
    return found


def types(schemas: list[dict]) -> set[str]:
    return {s["type"] for s in schemas if "type" in s} - {"null"}


def response_schema(operation: dict, status: str) -> dict:
    return operation["responses"][status]["content"]["application/json"]["schema"]


def test_the_schema_is_valid_openapi(document):
    schemathesis.openapi.from_dict(document).validate()


def test_sessions_link_to_every_operation_on_the_session_they_name(document):
    by_id = operations(document)
    links = {(source["operationId"], status, name): link for source, status, name, link in all_links(document)}

    for status in ("200", "201"):
        assert links["sessions_api_put_session", status, "GetSession"] == {
            "operationId": "sessions_api_get_one_session", "parameters": {"key": "$request.path.key"}}
    for view in ("get_one_session", "append", "raw_log", "model_input", "request_compaction",
                 "build_next_request", "list_checkpoints", "list_events", "export"):
        assert any(link["operationId"] == f"sessions_api_{view}"
                   for (source, status, _), link in links.items() if source == "sessions_api_put_session"), view
    assert links["sessions_api_append", "200", "PatchMessage"]["parameters"] == {
        "key": "$request.path.key", "seq": "$response.body#/messages/0/seq"}
    assert links["sessions_api_append", "200", "GetModelInputAsOf"]["parameters"]["as_of"] == \
        "$response.body#/messages/0/seq"
    assert links["sessions_api_list_sessions", "200", "GetSession"]["parameters"] == {
        "key": "$response.body#/items/0/key"}
    assert links["sessions_api_build_next_request", "200", "CountTokens"]["requestBody"] == {
        "messages": "$response.body#/model_input/messages"}
    sources = {source for source, _, _ in links}
    assert {op for op in by_id if op not in ("sessions_api_count_tokens", "sessions_api_export")} <= sources


def test_every_link_leads_to_an_operation_and_parameters_that_exist(document):
    by_id = operations(document)
    links = list(all_links(document))
    assert len(links) > 50

    for source, status, name, link in links:
        where = f"{source['operationId']} {status} {name}"
        assert link["operationId"] in by_id, where
        target = by_id[link["operationId"]]
        target_parameters = {p["name"]: p for p in target["parameters"]}
        assert set(link["parameters"]) <= set(target_parameters), where
        if "requestBody" in link:
            assert "requestBody" in target, where
        if target_required := {p["name"] for p in target["parameters"] if p.get("required")}:
            assert target_required <= set(link["parameters"]), where

        for parameter, expression in link["parameters"].items():
            expected = types(alternatives(document, target_parameters[parameter]["schema"]))
            if not expression.startswith("$"):  # a constant (OpenAPI allows them): of the parameter's type
                assert expression.isdigit() if "integer" in expected else "string" in expected, (where, expression)
                continue
            if match := REQUEST_PATH.fullmatch(expression):
                assert match["name"] in {p["name"] for p in source["parameters"] if p["in"] == "path"}, where
                continue
            match = RESPONSE_BODY.fullmatch(expression)
            assert match, (where, expression)
            found = schemas_at(document, response_schema(source, status), match["pointer"])
            assert found, (where, expression)
            assert types(found) <= expected, (where, expression, types(found), expected)

        for expression in link.get("requestBody", {}).values():
            match = RESPONSE_BODY.fullmatch(expression)
            assert match and schemas_at(document, response_schema(source, status), match["pointer"]), \
                (where, expression)
