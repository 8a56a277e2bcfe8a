from sessions.access import permissions as access


def navigation(request):
    """The projects the user belongs to, for the header's project switcher."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    match = getattr(request, "resolver_match", None)
    current = (match.kwargs.get("project") if match else None) or request.GET.get("project")
    return {
        "nav_projects": access.projects_for(user),
        "can_manage_keys": access.manages_keys(user),
        "can_import": access.imports_anywhere(user),
        "members_project": access.members_page_project(user, current),
    }
