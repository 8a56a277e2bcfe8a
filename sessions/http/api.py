"""HTTP API v1: a thin layer over the domain, one router per resource, each in its own module of this
package, assembled here in the order of the API's documentation. ctxweb/api.py mounts it at /api/v1/."""

from ninja import Router

from sessions.http import (
    compactions,
    compare,
    context_checks,
    keys,
    messages,
    model_input,
    project,
    requests,
    reviews,
    sessions,
)

router = Router()
for resource in (sessions, messages, model_input, compactions, context_checks, keys, project, requests, compare,
                 reviews):
    router.add_router("", resource.router)
