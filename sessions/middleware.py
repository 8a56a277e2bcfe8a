from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import HttpResponse, HttpResponseBadRequest, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.urls import reverse

# What a multipart upload adds to its files (boundaries, headers, the form's other fields), allowed on top of
# CTXWEB_MAX_IMPORT_BYTES when the Content-Length is checked; the files themselves are counted exactly.
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


class ImportSizeLimit:
    """The import page takes files up to CTXWEB_MAX_IMPORT_BYTES (not the API's CTXWEB_MAX_REQUEST_BYTES):
    a larger Content-Length is refused with 413 before the body is read, and a body that turns out larger
    while it streams in is refused too. Django spools large files to disk (FILE_UPLOAD_MAX_MEMORY_SIZE)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.method == "POST" and request.path == reverse("import"):
            limit = settings.CTXWEB_MAX_IMPORT_BYTES
            try:
                size = int(request.META.get("CONTENT_LENGTH") or "0")
            except ValueError:
                size = -1
            if size < 0:
                return HttpResponseBadRequest("Content-Length is not a size in bytes.",
                                              content_type="text/plain; charset=utf-8")
            if size > limit + FORM_ALLOWANCE:
                return self.too_large(limit)
            counter = UploadLimit(request, limit)
            request.upload_handlers.insert(0, counter)
            try:
                request.POST  # noqa: B018 -- parse now, through the counter
            except MultiPartParserError as exc:
                return HttpResponseBadRequest(f"The upload is not a valid form: {exc}",
                                              content_type="text/plain; charset=utf-8")
            if counter.too_large:
                return self.too_large(limit)
        return self.get_response(request)

    @staticmethod
    def too_large(limit: int) -> HttpResponse:
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
        if self._has_nul(request):
            if request.path.startswith("/api/"):
                return JsonResponse({"detail": self.DETAIL, "code": "invalid_field"}, status=422)
            return HttpResponseBadRequest(self.DETAIL, content_type="text/plain; charset=utf-8")
        return self.get_response(request)

    @staticmethod
    def _has_nul(request) -> bool:
        if "\x00" in request.path:
            return True
        fields = [request.GET]
        if request.method == "POST" and request.content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
            fields.append(request.POST)
        return any("\x00" in key or any("\x00" in value for value in values)
                   for query in fields for key, values in query.lists())


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
