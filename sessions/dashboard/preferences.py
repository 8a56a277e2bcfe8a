"""The session page's folded panels, remembered per user: which of PANELS a member left open. The page
renders them open or folded as stored (no flash of a panel opening after load); a toggle posts here."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_POST

from sessions.models import DashboardPreferences

# The panels of the session page's fold bar, in its order.
PANELS = ("metadata", "trace", "what-if", "chart", "as-of", "requests")


def open_panels(user) -> set[str]:
    """The panels `user` left open (none for a user who never opened one)."""
    preferences = DashboardPreferences.objects.filter(user=user).only("open_panels").first()
    return set(preferences.open_panels) & set(PANELS) if preferences else set()


@login_required
@require_POST
def panel_state(request: HttpRequest) -> HttpResponse:
    """POST panel=<one of PANELS>&open=1|0: remember that the user opened or folded it. 204; 400 for
    anything else, storing nothing."""
    panels, states = request.POST.getlist("panel"), request.POST.getlist("open")
    panel, state = (panels[0], states[0]) if len(panels) == len(states) == 1 else (None, None)
    if panel not in PANELS or state not in ("0", "1"):
        return HttpResponse(f"panel must be one of {', '.join(PANELS)} and open 0 or 1", status=400,
                            content_type="text/plain; charset=utf-8")
    preferences, _ = DashboardPreferences.objects.get_or_create(user=request.user)
    panels = set(preferences.open_panels) & set(PANELS)
    panels = panels | {panel} if state == "1" else panels - {panel}
    preferences.open_panels = [name for name in PANELS if name in panels]
    preferences.save(update_fields=["open_panels"])
    return HttpResponse(status=204)
