import json
from collections.abc import Iterable, Iterator

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import HttpResponse, HttpResponseBadRequest, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.urls import reverse

from sessions.access.masking import mask, mask_html, mask_value
from sessions.access.masking_policy import request_masking

# What a multipart upload adds to its files (boundaries, headers, the form's other fields), allowed on top of
# CTXWEB_MAX_IMPORT_BYTES (and of DATA_UPLOAD_MAX_MEMORY_SIZE) when the Content-Length is checked; the
# files themselves are counted exactly. Also all a visitor who is not logged in may send (a log-in form).
FORM_ALLOWANCE = 64 * 1024


class ApiRequestSizeLimit:
    """Refuse API request bodies over CTXWEB_MAX_REQUEST_BYTES with 413, before anything parses them.

    The size is the Content-Length, since Django reads exactly that many bytes. A body sent with a
    Transfer-Encoding (chunked) has none and would be read as empty, so it is refused, not misread.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path.startswith("/api/"):
            if request.META.get("HTTP_TRANSFER_ENCODING"):
                return JsonResponse(
                    {"detail": "Send the request body with a Content-Length header, not chunked.",
                     "code": "length_required"},
                    status=400,
                )
            try:
                size = int(request.META.get("CONTENT_LENGTH") or "0")
            except ValueError:
                size = -1
            if size < 0:
                return JsonResponse({"detail": "Content-Length is not a size in bytes.", "code": "bad_request"},
                                    status=400)
            if size > settings.CTXWEB_MAX_REQUEST_BYTES:
                return JsonResponse(
                    {
                        "detail": f"The request body is larger than {settings.CTXWEB_MAX_REQUEST_BYTES} bytes.",
                        "code": "request_too_large",
                    },
                    status=413,
                )
        return self.get_response(request)


class RateLimitHeaders:
    """Every answer to a request an API key was admitted (or refused) under says where the key's requests
    bucket stands: RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset (seconds until it is full again)
    and RateLimit-Policy (draft-ietf-httpapi-ratelimit-headers; sessions/access/rate_limits.py Quota), so a
    client can slow down before a 429, whose Retry-After says when to come back."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        quota = getattr(request, "rate_limit", None)
        if quota is not None:
            for name, value in quota.headers().items():
                response.headers.setdefault(name, value)
        return response


class UploadLimit(FileUploadHandler):
    """Counts the bytes of the files of an upload as they stream in and stops reading past `limit`."""

    def __init__(self, request, limit: int):
        super().__init__(request)
        self.limit, self.received, self.too_large = limit, 0, False

    def receive_data_chunk(self, raw_data, start):
        self.received += len(raw_data)
        if self.received > self.limit:
            self.too_large = True
            raise StopUpload(connection_reset=True)
        return raw_data

    def file_complete(self, file_size):
        return None


def content_length(request) -> int | None:
    """The request's Content-Length (0 without one), or None when it is not a size in bytes."""
    try:
        size = int(request.META.get("CONTENT_LENGTH") or "0")
    except ValueError:
        return None
    return size if size >= 0 else None


def has_own_body_limit(request) -> bool:
    """The API and the OTLP receiver: authenticated by a key, their bodies bounded before they are read
    (ApiRequestSizeLimit, ctxweb.otlp) and answered in their own formats."""
    return request.path.startswith(("/api/", "/v1/"))


class RequestBodyGate:
    """No page reads a body it is going to refuse. From the headers alone: a Content-Length over the page's
    limit is refused with 413 (the import page's is CTXWEB_MAX_IMPORT_BYTES and a form's FORM_ALLOWANCE, any
    other page's DATA_UPLOAD_MAX_MEMORY_SIZE and the same allowance, the log-in pages' for a visitor not
    logged in FORM_ALLOWANCE alone), and a body sent by a visitor who is not logged in goes to the log-in
    page unread, except to the log-in and log-out pages themselves.

    Django reads a form's body the first time request.POST is touched: by CsrfViewMiddleware's and
    RejectNulCharacters' process_view, or the view. Ours runs before theirs (it comes first in
    MIDDLEWARE) and after SessionMiddleware and AuthenticationMiddleware have found the user from the
    session cookie, which reads no body. Then the import page's files are counted as they stream in, and
    the upload stopped past CTXWEB_MAX_IMPORT_BYTES. The API and the OTLP receiver are left to their own
    checks (has_own_body_limit)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if has_own_body_limit(request):
            return self.get_response(request)
        size = content_length(request)
        if size is None:
            return HttpResponseBadRequest("Content-Length is not a size in bytes.",
                                          content_type="text/plain; charset=utf-8")
        if self.is_import(request):
            if size > settings.CTXWEB_MAX_IMPORT_BYTES + FORM_ALLOWANCE:
                return self.too_large_import()
        elif size > self.form_limit():
            return self.too_large(self.form_limit())
        return self.get_response(request)

    def process_view(self, request, view, args, kwargs):
        if has_own_body_limit(request) or not content_length(request):
            return None
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            if request.path not in self.anonymous_pages():
                admin = request.path.startswith(reverse("admin:index"))
                return redirect_to_login(request.get_full_path(), reverse("admin:login") if admin else None)
            if content_length(request) > FORM_ALLOWANCE:
                return self.too_large(FORM_ALLOWANCE)
        if self.is_import(request):
            counter = UploadLimit(request, settings.CTXWEB_MAX_IMPORT_BYTES)
            request.upload_handlers.insert(0, counter)
            try:
                request.POST  # noqa: B018 -- parse now, through the counter
            except MultiPartParserError as exc:
                return HttpResponseBadRequest(f"The upload is not a valid form: {exc}",
                                              content_type="text/plain; charset=utf-8")
            if counter.too_large:
                return self.too_large_import()
        return None

    @staticmethod
    def is_import(request) -> bool:
        return request.method == "POST" and request.path == reverse("import")

    @staticmethod
    def anonymous_pages() -> set[str]:
        return {reverse("login"), reverse("logout"), reverse("admin:login")}

    @staticmethod
    def form_limit() -> int:
        return (settings.DATA_UPLOAD_MAX_MEMORY_SIZE or settings.CTXWEB_MAX_REQUEST_BYTES) + FORM_ALLOWANCE

    @staticmethod
    def too_large(limit: int) -> HttpResponse:
        return HttpResponse(f"The request body is larger than this page takes ({limit:,} bytes).", status=413,
                            content_type="text/plain; charset=utf-8")

    @staticmethod
    def too_large_import() -> HttpResponse:
        limit = settings.CTXWEB_MAX_IMPORT_BYTES
        return HttpResponse(f"The upload is larger than the import limit of {limit:,} bytes "
                            f"(CTXWEB_MAX_IMPORT_BYTES).", status=413, content_type="text/plain; charset=utf-8")


class RejectNulCharacters:
    """A NUL character in the path, the query string or a submitted form is refused before any view
    sees it: PostgreSQL text cannot hold one, so a search or a filter with it would otherwise fail
    inside the database. The API answers 422 in its error shape, the dashboard 400; JSON bodies are
    checked field by field by the API's validation."""

    DETAIL = "The request must not contain NUL characters (in its path, query or form)."

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if "\x00" in request.path or self._has_nul(request.GET):
            return self.refuse(request)
        return self.get_response(request)

    def process_view(self, request, view, args, kwargs):
        """A submitted form is read here, after RequestBodyGate allowed its body; never the body of the
        API or the OTLP receiver, which parse their own."""
        if (request.method == "POST" and not has_own_body_limit(request)
                and request.content_type in ("application/x-www-form-urlencoded", "multipart/form-data")
                and self._has_nul(request.POST)):
            return self.refuse(request)
        return None

    def refuse(self, request) -> HttpResponse:
        if request.path.startswith("/api/"):
            return JsonResponse({"detail": self.DETAIL, "code": "invalid_field"}, status=422)
        return HttpResponseBadRequest(self.DETAIL, content_type="text/plain; charset=utf-8")

    @staticmethod
    def _has_nul(query) -> bool:
        return any("\x00" in key or any("\x00" in value for value in values) for key, values in query.lists())


class PersonalDataMasking:
    """Mask personal data in the whole response for those who see it masked (sessions/access/masking_policy.py:
    viewers of a project that masks, API keys marked `masked`): every page and fragment (its text and the
    attributes people read; sessions.access.masking.mask_html), every JSON answer (each string value),
    and every download as it streams (JSON Lines line by line, a JSON export whole, Markdown and CSV line by
    line). Applied here, once, so that no view, template or API operation can forget it. A masked response
    says so in its `X-Personal-Data: masked` header."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if response.status_code in (204, 304) or 300 <= response.status_code < 400:
            return response
        kind = response.get("Content-Type", "").split(";")[0].strip()
        if kind not in MASKED_TYPES:
            return response
        patterns = request_masking(request)
        if patterns is None:
            return response
        if response.streaming:
            response.streaming_content = masked_stream(response.streaming_content, kind, patterns)
        else:
            response.content = masked_body(response.content.decode(response.charset or "utf-8"), kind, patterns)
            if response.has_header("Content-Length"):
                response["Content-Length"] = str(len(response.content))
        response["X-Personal-Data"] = "masked"
        return response


MASKED_TYPES = {"text/html", "application/json", "application/x-ndjson", "text/markdown", "text/csv", "text/plain"}


def masked_body(text: str, kind: str, patterns) -> str:
    if kind == "text/html":
        return mask_html(text, patterns)
    if kind == "application/json":
        return json.dumps(mask_value(json.loads(text), patterns), ensure_ascii=False, separators=(",", ":"))
    if kind == "application/x-ndjson":
        return "".join(_masked_json_line(line, patterns) for line in text.splitlines(keepends=True))
    return "".join(mask(line, patterns) for line in text.splitlines(keepends=True))


def masked_stream(chunks: Iterable, kind: str, patterns) -> Iterator[bytes]:
    """A streamed body masked: a JSON document read whole (a value may span chunks), the others line by
    line (what a line holds is whole: a record of JSON Lines, a line of Markdown or CSV)."""
    if kind == "application/json":
        body = b"".join(c if isinstance(c, bytes) else c.encode() for c in chunks)
        yield masked_body(body.decode(), kind, patterns).encode()
        return
    pending = ""
    for chunk in chunks:
        pending += chunk.decode() if isinstance(chunk, bytes) else chunk
        *lines, pending = pending.split("\n")
        if lines:
            yield masked_body("".join(line + "\n" for line in lines), kind, patterns).encode()
    if pending:
        yield masked_body(pending, kind, patterns).encode()


def _masked_json_line(line: str, patterns) -> str:
    if not line.strip():
        return line
    end = line[len(line.rstrip("\r\n")):]
    return json.dumps(mask_value(json.loads(line), patterns), ensure_ascii=False, separators=(",", ":")) + end


class ContentSecurityPolicy:
    """Defence in depth for the dashboard: scripts only from our own static files, so message content
    can never run even if something were rendered unescaped; styles only from our stylesheet, so no
    inline style either (the meters are SVG drawn with attributes). Images may come from anywhere
    (messages carry image URLs)."""

    POLICY = (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: https: http:; "
        "object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
    )

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if not request.path.startswith(("/api/", "/admin/")):
            response.headers.setdefault("Content-Security-Policy", self.POLICY)
        return response
