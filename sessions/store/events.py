"""The append-only event history of a session. Event data is written and read through the
model of its type (event_types.py)."""

from datetime import datetime
from typing import Annotated, Literal, Union

from django.utils import timezone
from ninja import Field, Schema
from pydantic import BaseModel, TypeAdapter, create_model

from sessions.db.rows import insert
from sessions.models import Event, Session
from sessions.store.event_types import EVENT_DATA, EventData

EVENTS_PAGE = 40


def event_out_schema(data_model: type[EventData]) -> type[BaseModel]:
    """An event of one type, its data described by that type's model (event_types.py)."""
    return create_model(
        f"{data_model.__name__}Event", __base__=Schema,
        id=int, type=Literal[data_model.type.value], actor=str, data=data_model, created_at=datetime,
    )


# One schema per event type, told apart by `type`: a oneOf with a discriminator in the OpenAPI schema.
# (Union[...] takes the generated models as one tuple, which `|` cannot.)
EventOut = Annotated[Union[tuple(event_out_schema(m) for m in EVENT_DATA.values())], Field(discriminator="type")]  # noqa: UP007


EVENT_OUT = TypeAdapter(EventOut)


def actor(who) -> str:
    """Who did something, as events name them: `api:<key name>` for a request made with an API key,
    `user:<username>` for a person (a dashboard or admin request, or the user)."""
    if getattr(who, "auth", None) is not None:
        return f"api:{who.auth.name}"
    user = getattr(who, "user", who)
    return f"user:{user.get_username()}"


INSERT_FIELDS = ("session", "type", "actor", "data", "created_at")


def record(session: Session, actor: str, data: EventData) -> Event:
    """Store an event of data's type. Every append stores one, with an INSERT written as SQL
    (sessions/db/rows.py): Event.objects.create took 0.19 ms of CPU in process, mostly building the
    statement."""
    event = Event(session=session, type=data.type, actor=actor or "system", data=data.model_dump(mode="json"),
                  created_at=timezone.now())
    insert(event, INSERT_FIELDS)
    return event


def parse_event_data(type: str, data: dict) -> EventData:
    """Stored event data, as the model of its type; a row that does not fit raises ValidationError."""
    return EVENT_DATA[type].model_validate(data)


def event_data(event: Event) -> EventData:
    return parse_event_data(event.type, event.data)


def event_record_json(event: Event) -> dict:
    """One event as the API's event list gives it (EventOut)."""
    return EVENT_OUT.dump_python(EVENT_OUT.validate_python(event, from_attributes=True), mode="json")


def newest_events(session: Session, before: int | None = None, limit: int = EVENTS_PAGE) -> tuple[list[Event], bool]:
    """A page of the session's events, newest first (those before event id `before`), and whether an older
    page may follow."""
    events = session.events.all()
    if before is not None:
        events = events.filter(pk__lt=before)
    page = list(events.order_by("-pk")[:limit])
    return page, len(page) == limit
