"""Project members (roles viewer/editor/admin): admins add, change and remove members on the page;
other roles get 403, outsiders 404; the set_member command does the same from the shell."""

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from sessions.models import Membership

from .dom import parse

PAGE = reverse("members", args=["default"])


def role_of(username, project="default"):
    return Membership.objects.filter(user__username=username, project__name=project).values_list("role", flat=True).first()


def test_an_admin_sees_the_members_and_their_roles(admin_client, editor_user, viewer_user):
    doc = parse(admin_client.get(PAGE))
    rows = {tr.find_all("td")[0].text(): tr.find_all("td")[1].text() for tr in doc.find_all("tr") if tr.find("td")}
    assert rows == {"admin": "admin", "editor": "editor", "viewer": "viewer"}


def test_an_admin_adds_a_member(admin_client, make_user):
    make_user("newcomer")
    response = admin_client.post(PAGE, {"username": "newcomer", "role": "viewer"})
    assert response.status_code == 302
    assert response["Location"] == PAGE
    assert role_of("newcomer") == "viewer"
    assert "newcomer is now viewer" in parse(admin_client.get(PAGE)).one(cls="flash").text()


def test_an_admin_changes_a_members_role(admin_client, viewer_user):
    admin_client.post(PAGE, {"username": "viewer", "role": "editor"})
    assert role_of("viewer") == "editor"
    assert Membership.objects.filter(user=viewer_user).count() == 1


def test_an_admin_removes_a_member(admin_client, viewer_user, story):
    admin_client.post(PAGE, {"username": "viewer", "remove": "1"})
    assert role_of("viewer") is None
    from .conftest import make_client

    assert make_client(viewer_user).get(story.url()).status_code == 404


def test_adding_an_unknown_user_or_role_is_an_error_not_a_crash(admin_client, viewer_user):
    response = admin_client.post(PAGE, {"username": "ghost", "role": "viewer"}, follow=True)
    assert response.status_code == 200
    assert "ghost" in parse(response).one(cls="flash").text()
    response = admin_client.post(PAGE, {"username": "viewer", "role": "overlord"}, follow=True)
    assert response.status_code == 200
    assert role_of("viewer") == "viewer"


def test_a_member_of_the_other_project_added_here_gains_access(admin_client, outsider_user, outsider_client, story):
    assert outsider_client.get(story.url()).status_code == 404
    admin_client.post(PAGE, {"username": "outsider", "role": "viewer"})
    assert outsider_client.get(story.url()).status_code == 200
    assert role_of("outsider", "other") == "viewer"


@pytest.mark.parametrize("who", ["viewer_client", "editor_client"])
def test_viewers_and_editors_get_403(request, who, make_user, admin_user):
    client = request.getfixturevalue(who)
    make_user("newcomer")
    assert client.get(PAGE).status_code == 403
    assert client.post(PAGE, {"username": "newcomer", "role": "admin"}).status_code == 403
    assert client.post(PAGE, {"username": "admin", "remove": "1"}).status_code == 403
    assert role_of("newcomer") is None
    assert role_of("admin") == "admin"


def test_an_outsider_gets_404(outsider_client, admin_user):
    assert outsider_client.get(PAGE).status_code == 404
    assert outsider_client.post(PAGE, {"username": "outsider", "role": "admin"}).status_code == 404
    assert role_of("outsider") is None
    assert outsider_client.get(reverse("members", args=["no-such-project"])).status_code == 404


def test_an_admin_of_default_cannot_manage_other(admin_client, outsider_user):
    assert admin_client.get(reverse("members", args=["other"])).status_code == 404
    admin_client.post(reverse("members", args=["other"]), {"username": "admin", "role": "admin"})
    assert role_of("admin", "other") is None


def test_the_set_member_command_adds_changes_and_removes(make_user, project, capsys):
    make_user("cli-user")
    call_command("set_member", "default", "cli-user", "viewer")
    assert role_of("cli-user") == "viewer"
    assert "cli-user is now viewer of default (new member)." in capsys.readouterr().out
    call_command("set_member", "default", "cli-user", "admin")
    assert role_of("cli-user") == "admin"
    assert Membership.objects.filter(user__username="cli-user").count() == 1
    call_command("set_member", "default", "cli-user", "--remove")
    assert role_of("cli-user") is None


def test_the_set_member_command_refuses_unknown_projects_users_and_roles(make_user, project):
    make_user("cli-user")
    with pytest.raises(CommandError):
        call_command("set_member", "nope", "cli-user", "viewer")
    with pytest.raises(CommandError):
        call_command("set_member", "default", "ghost", "viewer")
    with pytest.raises(CommandError):
        call_command("set_member", "default", "cli-user", "overlord")
    with pytest.raises(CommandError):
        call_command("set_member", "default", "cli-user")
    with pytest.raises(CommandError):
        call_command("set_member", "default", "cli-user", "--remove")
    assert role_of("cli-user") is None


def test_an_unknown_username_and_a_user_who_cannot_be_added_get_the_same_answer(admin_client, make_user):
    """No enumeration: the page tells a project's admin nothing about which usernames exist."""
    retired = make_user("retired")
    retired.is_active = False
    retired.save()

    answers = []
    for username in ("retired", "ghost"):
        response = admin_client.post(PAGE, {"username": username, "role": "viewer"}, follow=True)
        flash = parse(response).one(cls="flash").text().replace(username, "NAME")
        answers.append((response.status_code, response.redirect_chain, flash))

    assert answers[0] == answers[1]
    assert answers[0][2] == "NAME cannot be added: no active account has that username."
    assert role_of("retired") is None and role_of("ghost") is None
