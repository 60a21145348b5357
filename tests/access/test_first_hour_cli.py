"""Issue 43, items 7 and 8: one role per person, shown alike by `fleet users list` and the
dashboard's header; and the CLI on a database without its schema (right after `make reset`) says
so in one line, with what to run, instead of a traceback."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import uuid

import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command
from django.test import Client
from psycopg import sql

from fleet.access.roles import roles_sync
from tests.e2e.test_demo_command import _url_for
from tests.helpers import REPO, fleet_env


def _listed() -> dict[str, str]:
    out = io.StringIO()
    call_command("users", "list", stdout=out)
    return {line.split("\t")[0]: line.split("\t")[1] for line in out.getvalue().splitlines()}


def _header_role(user) -> str:
    client = Client()
    client.force_login(user)
    page = client.get("/").content.decode()
    found = re.search(r'role: <strong id="role">([^<]+)</strong>', page)
    assert found, page[:2000]
    return found.group(1)


@pytest.mark.django_db
def test_each_person_s_role_is_the_same_in_users_list_and_in_the_dashboard_header():
    roles_sync()
    User = get_user_model()
    people = {
        # the demo's admin: a superuser in no group (the list said "no role", the header "admin")
        "root": User.objects.create_superuser("root", "root@example.com", "a long enough passphrase 7"),
        "ops": User.objects.create_user("ops", password="a long enough passphrase 7"),
        "reader": User.objects.create_user("reader", password="a long enough passphrase 7"),
        "granted": User.objects.create_user("granted", password="a long enough passphrase 7"),
        "nobody": User.objects.create_user("nobody", password="a long enough passphrase 7"),
    }
    people["ops"].groups.add(Group.objects.get(name="operator"))
    people["reader"].groups.add(Group.objects.get(name="viewer"))
    # permissions given one by one, no group: they amount to the operator role
    people["granted"].user_permissions.add(
        *Permission.objects.filter(
            codename__in=["view_policyprogress", "add_job"], content_type__app_label__in=["burnin", "jobs"]
        )
    )

    listed = _listed()

    assert listed == {
        "granted": "operator",
        "nobody": "no role",
        "ops": "operator",
        "reader": "viewer",
        "root": "admin (superuser)",
    }
    for name, user in people.items():
        assert _header_role(User.objects.get(pk=user.pk)) == listed[name].removesuffix(" (superuser)"), name


@pytest.fixture
def empty_database():
    """A database that exists and has no schema, as `make reset` and a first start leave it."""
    name = f"fleet_noschema_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(_url_for("postgres"), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield _url_for(name)
    finally:
        with psycopg.connect(_url_for("postgres"), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.mark.process
@pytest.mark.parametrize(
    "command",
    [["users", "list"], ["export"], ["apply", "--dry-run", "-f", "examples/fleet.yaml"]],
    ids=["users-list", "export", "apply-dry-run"],
)
def test_a_command_on_a_database_without_its_schema_is_one_line_saying_what_to_run(empty_database, command):
    result = subprocess.run(
        [sys.executable, "-m", "fleet", *command],
        env=fleet_env(DATABASE_URL=empty_database),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "has no schema yet" in lines[0] and "run `fleet migrate`" in lines[0], lines[0]
    assert result.stdout == ""


@pytest.mark.process
def test_fleet_help_lists_the_product_s_commands_first_and_keeps_django_s_one_command_away():
    shown = subprocess.run(
        [sys.executable, "-m", "fleet", "--help"],
        env=fleet_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    everything = subprocess.run(
        [sys.executable, "-m", "fleet", "help", "--all"],
        env=fleet_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert shown.returncode == 0, shown.stderr
    own = ["demo", "serve", "apply", "export", "users", "roles", "rerun", "isolate", "certificate", "evidence-pack"]
    listed = [line.split()[0] for line in shown.stdout.splitlines() if line.startswith("  ")]
    assert set(own) <= set(listed)
    assert not {"startproject", "flush", "sendtestemail", "makemigrations"} & set(listed)
    assert "fleet help --all" in shown.stdout
    assert everything.returncode == 0
    assert "startproject" in everything.stdout and "migrate" in everything.stdout
