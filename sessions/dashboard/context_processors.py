from sessions.access import permissions as access


def navigation(request):
    """The projects the user belongs to, for the header's project switcher."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {
        "nav_projects": access.projects_for(user),
        "can_manage_keys": access.manages_keys(user),
        "can_import": access.imports_anywhere(user),
    }
