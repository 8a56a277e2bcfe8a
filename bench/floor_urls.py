"""The product's addresses and the floor of a small append (issue 42, item 1): `POST /api/v1/floor/write`
authenticates and admits the request exactly as the API does (ctxweb.api.ApiKeyAuth: the key's lookup and
its rate-limit UPDATE), then commits the request body as one row of a bare table, durably: on the same
database connection as the app, so with the same synchronous settings (SQLite's synchronous=FULL in WAL,
PostgreSQL's synchronous_commit=on). What an acknowledged append cannot do without: know the key, and have
a row on disk before it answers."""

from django.db import connection, transaction
from django.http import JsonResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from ctxweb.api import ApiKeyAuth
from ctxweb.urls import urlpatterns as product

TABLE = "bench_floor_write"


def create_table() -> None:
    """The floor's table, with no index but its key (run by the benchmark before the server starts)."""
    key = "BIGSERIAL PRIMARY KEY" if connection.vendor == "postgresql" else "INTEGER PRIMARY KEY"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (id {key}, key_id BIGINT NOT NULL, body TEXT NOT NULL)")


def rows() -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {TABLE}")
        return cursor.fetchone()[0]


@csrf_exempt
def write(request):
    if request.method != "POST":
        return JsonResponse({"detail": "POST"}, status=405)
    try:
        key = ApiKeyAuth()(request)
    except Exception as exc:  # noqa: BLE001 - any refusal of the key is the floor's 401
        return JsonResponse({"detail": str(exc)}, status=401)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {TABLE} (key_id, body) VALUES (%s, %s)", [key.pk, request.body.decode()])
    return JsonResponse({"stored": 1})


urlpatterns = [path("api/v1/floor/write", write), *product]
