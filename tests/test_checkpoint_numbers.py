"""Checkpoint numbers: 1, 2, 3 within a session. Migration 0017 numbers the checkpoints stored before it
(on SQLite and PostgreSQL alike); checkpoints made later take previous.number + 1."""

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from sessions.models import Checkpoint

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("ctx_sessions", "0016_checkpoint_lost_facts")]
AFTER = [("ctx_sessions", "0017_checkpoint_number")]  # what the test checks: the state 0017 makes


def latest() -> list[tuple[str, str]]:
    """Every app's newest migration: where the test leaves the database, whatever came after 0017."""
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def test_the_migration_numbers_stored_checkpoints_per_session_in_creation_order():
    apps = migrate(BEFORE)
    try:
        Project = apps.get_model("ctx_sessions", "Project")
        Session = apps.get_model("ctx_sessions", "Session")
        Old = apps.get_model("ctx_sessions", "Checkpoint")
        project = Project.objects.create(name="numbers")
        a, b, empty = (Session.objects.create(project=project, key=k) for k in ("a", "b", "empty"))

        def chain(session, ends):
            previous, first, made = None, 1, []
            for last in ends:
                previous = Old.objects.create(session=session, previous=previous, summary=f"up to {last}",
                                              first_seq=first, last_seq=last, created_at_seq=last,
                                              summary_tokens=5, summarizer="test")
                made.append(previous.pk)
                first = last + 1
            return made

        # Interleaved, so ids are not consecutive within a session.
        a_ids = chain(a, [4])
        b_ids = chain(b, [3, 9])
        a_ids += chain_more(Old, a, a_ids[-1], [(5, 8), (9, 12)])
    finally:
        migrate(AFTER)
        migrate(latest())
    numbers = dict(Checkpoint.objects.values_list("pk", "number"))
    assert [numbers[pk] for pk in a_ids] == [1, 2, 3]
    assert [numbers[pk] for pk in b_ids] == [1, 2]
    assert not Checkpoint.objects.filter(session__key="empty").exists()
    # Unique within a session.
    with pytest.raises(IntegrityError), transaction.atomic():
        Checkpoint.objects.filter(pk=a_ids[1]).update(number=1)


def chain_more(Old, session, previous_pk, ranges):
    made = []
    for first, last in ranges:
        previous_pk = Old.objects.create(session=session, previous_id=previous_pk, summary=f"up to {last}",
                                         first_seq=first, last_seq=last, created_at_seq=last,
                                         summary_tokens=5, summarizer="test").pk
        made.append(previous_pk)
    return made
