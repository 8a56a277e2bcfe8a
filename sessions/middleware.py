from django.conf import settings
from django.http import JsonResponse


class ApiRequestSizeLimit:
    """Refuse API request bodies over CTXWEB_MAX_REQUEST_BYTES with 413, before anything parses them."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path.startswith("/api/"):
            length = request.META.get("CONTENT_LENGTH") or "0"
            try:
                size = int(length)
            except ValueError:
                return JsonResponse({"detail": "Content-Length is not a number.", "code": "bad_request"}, status=400)
            if size > settings.CTXWEB_MAX_REQUEST_BYTES:
                return JsonResponse(
                    {
                        "detail": f"The request body is larger than {settings.CTXWEB_MAX_REQUEST_BYTES} bytes.",
                        "code": "request_too_large",
                    },
                    status=413,
                )
        return self.get_response(request)


class ContentSecurityPolicy:
    """Defence in depth for the dashboard: scripts only from our own static files, so message content
    can never run even if something were rendered unescaped. Images may come from anywhere (messages
    carry image URLs)."""

    POLICY = (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: https: http:; "
        "object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
    )

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if not request.path.startswith(("/api/", "/admin/")):
            response.headers.setdefault("Content-Security-Policy", self.POLICY)
        return response
