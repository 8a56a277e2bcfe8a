from django.conf import settings
from django.http import HttpResponseBadRequest, JsonResponse


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
