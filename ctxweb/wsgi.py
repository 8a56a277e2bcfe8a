import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
application = get_wsgi_application()

# Each web process loads the token encoding as it starts, not on the first request that counts tokens
# (a quarter of a second there): every append counts tokens, and its first one should not wait for it.
from sessions.tokens import count_text  # noqa: E402 - needs the settings configured above

count_text("ready")
