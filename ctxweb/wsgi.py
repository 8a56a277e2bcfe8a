import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
application = get_wsgi_application()

# Each web process loads the token encoding as it starts, not on the first request that counts tokens
# (a quarter of a second there): every append counts tokens, and its first one should not wait for it.
from sessions.wire.tokens import count_text  # noqa: E402 - needs the settings configured above

count_text("ready")

# Everything loaded so far (Django, the URLs and the API with their views, the encoding) lives as long
# as the process: moved out of the garbage collector's reach, so that a full collection, which a
# request's allocations set off now and then, does not walk its hundred thousand objects each time (one
# of those took 40-50 ms in the middle of a model-input build, against 3.6 ms for the build itself).
from django.urls import get_resolver  # noqa: E402

get_resolver().url_patterns  # noqa: B018 - imports every view and the API
gc.freeze()
