from django.apps import AppConfig


class SessionsConfig(AppConfig):
    name = "sessions"
    # The default label "sessions" collides with django.contrib.sessions.
    label = "ctx_sessions"
    verbose_name = "ctxweb sessions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from sessions.access import throttle  # noqa: F401  (registers system checks; counts failed log-ins
