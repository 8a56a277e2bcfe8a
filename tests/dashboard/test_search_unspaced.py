"""Words inside sentences of the scripts written without spaces (Japanese, Chinese, Korean, Thai) are
found on both databases, through the full-text index (Message.search_grams, sessions/wire/grams.py):
any substring of two or more characters, alone or beside spaced words; highlighted where it stands."""

import pytest
from django.urls import reverse

from sessions.ingest.append import append_messages
from sessions.models import Message, Session
from sessions.store.search import SearchFilters, search, search_messages, sessions_matching
from sessions.wire.grams import search_grams

from .dom import parse

SEARCH = reverse("search")
JAPANESE = "このモデルは最新の情報を持っていません。予約番号はABC123です。"
CHINESE = "我们的航班延误了，请帮我改签到明天早上的航班。"
KOREAN = "서울에서 부산까지 가는 기차표를 예약하고 싶어요."
THAI = "ฉันต้องการเปลี่ยนเที่ยวบินของฉัน"
ENGLISH = "The newest information about the booking is not here."


@pytest.fixture
def corpus(project):
    append_messages(project, "ja", [{"role": "user", "content": JAPANESE}], "test")
    append_messages(project, "zh", [{"role": "user", "content": CHINESE}], "test")
    append_messages(project, "ko", [{"role": "assistant", "content": [{"type": "text", "text": KOREAN}]}], "test")
    append_messages(project, "th", [{"role": "user", "content": THAI}], "test")
    append_messages(project, "en", [{"role": "user", "content": ENGLISH}], "test")


def found(project, query):
    return sorted(hit.message.session.key for hit in search_messages(query, SearchFilters([project.pk])))


@pytest.mark.parametrize(("query", "keys"), [
    ("最新", ["ja"]),  # two characters inside a sentence: the example
    ("最新の情報", ["ja"]),
    ("予約番号", ["ja"]),
    ("情報 ABC123", ["ja"]),  # beside a spaced word
    ("航班", ["zh"]),  # twice in the message
    ("改签到明天", ["zh"]),
    ("부산", ["ko"]),
    ("서울", ["ko"]),  # followed by a particle, with no space: 서울에서
    ("เที่ยวบิน", ["th"]),
    ("newest", ["en"]),
])
def test_a_substring_of_two_or_more_characters_is_found(corpus, project, query, keys):
    assert found(project, query) == keys


@pytest.mark.parametrize("query", [
    "最情",  # both characters are in the message, never side by side
    "新最",  # the right characters in the wrong order
    "情報 XYZ999",  # every word must be there
    "東京",
])
def test_what_the_text_does_not_hold_is_not_found(corpus, project, query):
    assert found(project, query) == []


def test_a_hit_is_marked_where_the_word_stands_in_the_sentence(corpus, viewer_client):
    page = parse(viewer_client.get(SEARCH, {"q": "最新"})).one(id="search-results")
    assert [m.text() for m in page.find_all("mark")] == ["最新"]
    hit = search_messages("最新", SearchFilters([Message.objects.get(session__key="ja").session.project_id]))[0]
    assert "<mark>最新</mark>の情報" in hit.snippet


def test_the_search_page_counts_and_the_sessions_list_finds_them_too(corpus, project, viewer_client):
    assert search("航班", SearchFilters([project.pk])).total == 1
    listed = sessions_matching(Session.objects.filter(project=project), "明天", [project.pk])
    assert [s.key for s in listed] == ["zh"]
    response = viewer_client.get(reverse("sessions"), {"q": "부산", "project": project.name})
    assert response.status_code == 200 and "ko" in response.content.decode()


def test_only_text_with_an_unspaced_run_stores_grams(corpus):
    assert Message.objects.get(session__key="en").search_grams == ""
    assert search_grams("see AB最新の, ok") == "AB 最新 新の ,"
    assert Message.objects.get(session__key="ko").search_grams.startswith("서울 울에 에서 부산")


def test_the_migration_fills_the_grams_of_messages_stored_before_it(corpus, project):
    """Messages stored before migration 0025 get their grams from it, and search finds them."""
    from importlib import import_module

    from django.apps import apps
    from django.db import connection

    migration = import_module("sessions.migrations.0025_message_search_grams")
    stored = dict(Message.objects.values_list("session__key", "search_grams"))
    Message.objects.update(search_grams="")  # as the messages stored before it were
    assert found(project, "最新") == []

    migration.fill(apps, connection.schema_editor())

    assert dict(Message.objects.values_list("session__key", "search_grams")) == stored
    assert found(project, "最新") == ["ja"]
