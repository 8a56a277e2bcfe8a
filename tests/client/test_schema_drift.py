"""The client keeps its own dataclasses (it must not import Django), so this test holds them to the
API's OpenAPI schema: a field added to or dropped from a response fails here until the client follows."""

from dataclasses import fields

import pytest
from django.test import Client as DjangoClient

from ctxweb import client

# dataclass -> the component of /api/v1/openapi.json it reads
READS = {
    client.Session: "SessionOut",
    client.SessionPage: "SessionListOut",
    client.AppendedMessage: "AppendedOut",
    client.AppendResult: "AppendOut",
    client.Checkpoint: "CheckpointOut",
    client.EventPage: "EventListOut",
    client.Compaction: "CompactionOut",
    client.CompactionRun: "CompactionRunOut",
    client.Message: "MessageOut",
    client.MessagePage: "MessagePageOut",
    client.Omission: "OmittedOut",
    client.ModelInput: "ModelInputOut",
    client.TokenCount: "TokensOut",
    client.Explanation: "ExplainOut",
    client.RecordedRequestSummary: "RecordedRequestSummaryOut",
    client.RecordedRequestPage: "RecordedRequestListOut",
    client.RecordedRequest: "RecordedRequestOut",
    client.ContextCheck: "ContextCheckOut",
    client.ContextCheckFact: "ContextCheckFactOut",
}
CLIENT_ONLY = {client.Session: {"created"}}  # what the client adds from the response's status


@pytest.fixture(scope="module")
def components(django_db_blocker):
    with django_db_blocker.unblock():
        response = DjangoClient(HTTP_HOST="127.0.0.1").get("/api/v1/openapi.json")
    assert response.status_code == 200
    return response.json()["components"]["schemas"]


def properties(components, name) -> set[str]:
    schema = components[name]
    if "oneOf" in schema or "anyOf" in schema:  # a union of shapes: the fields they all have
        shapes = [components[ref["$ref"].rsplit("/", 1)[-1]] for ref in schema.get("oneOf") or schema["anyOf"]]
        return set.intersection(*(set(shape["properties"]) for shape in shapes))
    return set(schema["properties"])


@pytest.mark.parametrize("dataclass", list(READS), ids=lambda d: d.__name__)
def test_each_client_dataclass_has_the_fields_of_its_response_schema(components, dataclass):
    own = {f.name for f in fields(dataclass)} - CLIENT_ONLY.get(dataclass, set())
    assert own == properties(components, READS[dataclass])


def test_the_event_dataclass_has_the_fields_every_event_shape_has(components):
    """Events are one shape per type (a oneOf on `type`); the client reads what they all have."""
    items = components["EventListOut"]["properties"]["items"]["items"]
    shapes = [components[ref["$ref"].rsplit("/", 1)[-1]] for ref in items["oneOf"]]
    assert len(shapes) > 10
    common = set.intersection(*(set(shape["properties"]) for shape in shapes))
    assert {f.name for f in fields(client.Event)} == common
