"""`fleet users add/list`: a person gets exactly the role asked for; a refused name, role or
password changes nothing and says which field."""

from __future__ import annotations

import io
import sys

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from fleet.access.users import user_add


@pytest.fixture(autouse=True)
def _stdin(monkeypatch):
    """Standard input as a pipe holds it: what `--password-stdin` reads (the real one put back after)."""
    monkeypatch.setattr("sys.stdin", sys.stdin)

    def feed(text: str) -> None:
        monkeypatch.setattr("sys.stdin", io.StringIO(text))

    return feed


def _add(name: str, role: str, password: str = "a long enough passphrase 7") -> str:
    sys.stdin = io.StringIO(password + "\n")  # the autouse fixture puts the real one back
    out = io.StringIO()
    call_command("users", "add", name, "--role", role, "--password-stdin", stdout=out)
    return out.getvalue()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("role", "may_dispatch", "may_view", "staff"),
    [("viewer", False, True, False), ("operator", True, True, False), ("admin", True, True, True)],
)
def test_a_user_added_with_a_role_holds_exactly_its_permissions(role, may_dispatch, may_view, staff):
    assert f"Added ana as {role}." in _add("ana", role)

    user = get_user_model().objects.get(username="ana")
    assert user.check_password("a long enough passphrase 7")
    assert user.has_perm("jobs.add_job") is may_dispatch
    assert user.has_perm("burnin.view_policyprogress") is may_view
    assert user.is_staff is staff and not user.is_superuser


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "password", "field"),
    [("bo b", "a long enough passphrase 7", "username"), ("bob", "short", "password")],
)
def test_a_refused_user_is_not_created_and_the_field_is_named(name, password, field):
    with pytest.raises(CommandError, match=f"^{field}: "):
        _add(name, "viewer", password)
    assert not get_user_model().objects.filter(username=name).exists()


@pytest.mark.django_db
def test_an_unknown_role_is_refused_by_the_service_naming_the_roles():
    with pytest.raises(ValidationError) as refused:
        user_add(username="bob", role="root", password="a long enough passphrase 7")
    assert "viewer, operator, admin" in refused.value.message_dict["role"][0]
    assert not get_user_model().objects.filter(username="bob").exists()


@pytest.mark.django_db
def test_an_existing_name_is_refused_and_keeps_its_role():
    _add("cy", "viewer")
    with pytest.raises(CommandError, match="exists already"):
        _add("cy", "admin")
    assert not get_user_model().objects.get(username="cy").has_perm("jobs.add_job")


@pytest.mark.django_db
def test_no_password_on_stdin_is_refused(_stdin):
    _stdin("")
    with pytest.raises(CommandError, match="no password"):
        call_command("users", "add", "dee", "--role", "viewer", "--password-stdin")


@pytest.mark.django_db
def test_list_names_each_user_with_their_role():
    _add("eve", "operator")
    _add("fay", "viewer")
    out = io.StringIO()
    call_command("users", "list", stdout=out)
    lines = out.getvalue().splitlines()
    assert any(line.startswith("eve\toperator") for line in lines)
    assert any(line.startswith("fay\tviewer") for line in lines)
