"""Reviewers asking a review queue for their next session at the same moment, on PostgreSQL (real row locks,
concurrent transactions): no session is handed to two of them, and every one is reviewed once."""

import threading
from collections import Counter

import pytest
from django.db import connection

from sessions.ingest.append import append_messages
from sessions.models import Project, Review
from sessions.store.review_queues import create_queue, next_in_queue
from sessions.store.reviews import add_review

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]

REVIEWERS = 6


def run_together(work) -> list:
    """work(reviewer_number) in REVIEWERS threads started at once; what each returned."""
    start = threading.Barrier(REVIEWERS)
    results, errors = [None] * REVIEWERS, []

    def reviewer(number: int):
        try:
            start.wait()
            results[number] = work(number)
        except Exception as exc:  # reported below; a thread's exception would otherwise vanish
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=reviewer, args=(n,)) for n in range(REVIEWERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a reviewer is still waiting"
    assert errors == []
    return results


@pytest.fixture
def queue_and_people(django_user_model):
    project = Project.objects.get_or_create(name="default")[0]
    for n in range(2 * REVIEWERS):
        append_messages(project, f"s-{n:02d}", [{"role": "user", "content": f"question {n}"}], "test")
    people = [django_user_model.objects.create_user(f"reviewer{n}") for n in range(REVIEWERS)]
    return create_queue(project, people[0], "Everything", ""), people


def test_reviewers_asking_at_once_each_get_a_session_of_their_own(queue_and_people):
    queue, people = queue_and_people

    handed = run_together(lambda n: next_in_queue(queue, people[n]).key)

    assert len(set(handed)) == REVIEWERS, handed


def test_reviewers_working_a_queue_at_once_review_every_session_once(queue_and_people):
    queue, people = queue_and_people

    def work(n: int) -> list[str]:
        done = []
        while (session := next_in_queue(queue, people[n])) is not None:
            add_review(session, people[n], "ok", queue=queue)
            done.append(session.key)
        return done

    reviewed = [key for keys in run_together(work) for key in keys]

    assert sorted(reviewed) == [f"s-{n:02d}" for n in range(2 * REVIEWERS)]
    assert Counter(Review.objects.filter(queue=queue).values_list("session__key", flat=True)).most_common(1)[0][1] == 1
