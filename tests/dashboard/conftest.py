"""A burnt-in site for the dashboard's tests, built through the services an agent's work goes
through: executions reported, evaluated by the agent's own evaluator, reconciled."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from django.contrib.auth.models import Permission

from fleet.burnin.evaluation_results.service import evaluation_results_upsert
from fleet.burnin.models import TestExecution
from fleet.burnin.reconcile.service import reconcile_sweep
from fleet.policies.selectors import load_resolutions
from fleet_rules.evaluations import ResultItem
from fleet_rules.evaluator import evaluate
from fleet_rules.vocabulary import WorkflowName
from tests.builders import FleetBuilder

RC = "gpu.h200.8x"
HBM_RULE = {"metric": "hbm_bandwidth_tbps", "statistic": "min", "comparator": "gte", "threshold": 3.6}
DIAG_RULE = {"metric": "diag_failed_tests", "comparator": "eq", "threshold": 0}
NCCL_RULE = {"metric": "busbw_gbps", "comparator": "gte", "threshold": 350}

#: What a viewer may read, and what an operator may do besides (the API's session permissions).
VIEWER = [
    "burnin.view_policyprogress",
    "burnin.view_testexecution",
    "jobs.view_job",
    "inventory.view_device",
    "inventory.view_site",
    "burnin.view_acceptancecertificate",
]
OPERATOR = [*VIEWER, "jobs.add_job", "jobs.change_job", "inventory.change_device"]


@dataclass
class BurntIn:
    fleet: FleetBuilder
    site: object
    satellite: object
    racks: list = field(default_factory=list)
    devices: list = field(default_factory=list)
    requirements: dict = field(default_factory=dict)
    failing: list = field(default_factory=list)  # hostnames whose hbm-bandwidth failed

    def report(self, name, *, device=None, topology=None, metrics, status="completed", error=""):
        """Report an execution and evaluate it as the agent's phase 1 does."""
        execution = self.fleet.execution(
            self.requirements[name], device=device, topology=topology, metrics=metrics, status=status, error=error
        )
        evaluate_execution(self, execution.id)
        return execution

    def sweep(self):
        return reconcile_sweep(site_slug=self.site.slug, satellite_name=self.satellite.name, resource_class=RC)

    def add_racks(self, count: int) -> None:
        """Racks of four devices: gpu-diag passes everywhere, hbm-bandwidth fails on the first device
        of every rack (2.932 TB/s against 3.6), the first rack's collective passes, the second's
        errors, later ones have not run; then a reconcile sweep."""
        for _ in range(count):
            r = len(self.racks)
            rack = self.fleet.topology(self.satellite, "rack", f"rack-a{r:02d}")
            self.racks.append(rack)
            for n in range(4):
                device = self.fleet.device(self.satellite, RC, hostname=f"a{r:02d}-n{n:02d}", topologies=[rack])
                self.devices.append(device)
                self.report("gpu-diag", device=device, metrics={"diag_failed_tests": {"value": 0}})
                hbm = 2.932 if n == 0 else 4.0 + n / 100
                if n == 0:
                    self.failing.append(device.hostname)
                self.report(
                    "hbm-bandwidth",
                    device=device,
                    metrics={"hbm_bandwidth_tbps": {"value": hbm + 0.5, "unit": "TB/s", "statistics": {"min": hbm}}},
                )
            if r == 0:
                self.report("rack-nccl", topology=rack, metrics={"busbw_gbps": {"value": 380.5, "unit": "GB/s"}})
            elif r == 1:
                self.report("rack-nccl", topology=rack, metrics={}, status="errored", error="mpirun: node lost")
        self.sweep()


def evaluate_execution(world: BurntIn, execution_id) -> None:
    """Phase 1 for one finished execution: the agent's evaluator against the current thresholds,
    posted through the upsert service."""
    execution = TestExecution.objects.get(id=execution_id)
    pair = (execution.requirement_id, world.site.id)
    resolution = load_resolutions([pair])[pair]
    payload = evaluate(
        status=execution.status, metrics=execution.metrics, rules=resolution.rules_list, error=execution.error
    )
    counts = evaluation_results_upsert(
        items=[ResultItem(execution.id, payload, resolution.key, execution.updated_at)], actor=None
    )
    assert counts.written == 1


def build_site(fleet: FleetBuilder, racks: int) -> BurntIn:
    """`racks` racks of four H200 devices (see `BurntIn.add_racks`), then one reconcile sweep."""
    site = fleet.site("lon-1", "London 1")
    satellite = fleet.satellite(site, "sat-a", workflows=list(WorkflowName.values))
    policy = fleet.policy(RC)
    world = BurntIn(fleet, site, satellite)
    world.requirements = {
        "gpu-diag": fleet.requirement(policy, "gpu-diag", test="dcgm-diag", thresholds=[DIAG_RULE]),
        "hbm-bandwidth": fleet.requirement(policy, "hbm-bandwidth", test="nvbandwidth", thresholds=[HBM_RULE]),
        "rack-nccl": fleet.requirement(
            policy, "rack-nccl", scope="multi_node", unit="rack", test="nccl-multi", thresholds=[NCCL_RULE]
        ),
    }
    fleet.profile(RC, "dcgm-diag", {"level": 3})
    fleet.profile(RC, "nvbandwidth", {})
    fleet.profile(RC, "nccl-multi", {})
    world.add_racks(racks)
    return world


@pytest.fixture
def burnt_in(fleet) -> BurntIn:
    return build_site(fleet, racks=2)


@pytest.fixture
def person(client, user_factory) -> Callable[..., object]:
    """A signed-in browser session (Django's test client, CSRF checked) with these permissions."""
    from django.test import Client

    def make(perms: list[str] | None, username: str = "person") -> Client:
        user = user_factory(username=username)
        for perm in perms or []:
            app_label, codename = perm.split(".")
            user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
        browser = Client(enforce_csrf_checks=True)
        browser.force_login(user)
        return browser

    return make


# --- a person's actions through the pages (Post/Redirect/Get with a token: fleet.dashboard.actions) ---------

DISPATCH = "/sites/lon-1/reruns/dispatch/"


def csrf(browser) -> str:
    browser.get("/jobs/")  # sets the CSRF cookie, as a browser would
    return browser.cookies["csrftoken"].value


def post(browser, url: str, data: dict):
    return browser.post(url, data | {"csrfmiddlewaretoken": csrf(browser)})


def preview(browser, selection: dict) -> tuple[str, str]:
    """POST a selection as the grid does; follow the redirect to the preview page; (its URL, HTML)."""
    response = post(browser, "/sites/lon-1/reruns/preview/", selection)
    assert response.status_code == 303, response.status_code
    url = response["Location"]
    page = browser.get(url)
    assert page.status_code == 200
    return url, page.content.decode()


def form_fields(page: str, action: str) -> dict[str, list[str]]:
    """The inputs of the form posting to `action`, as a browser sends them with every box ticked."""
    form = page.split(f'action="{action}"', 1)[1].split("</form>", 1)[0]
    fields: dict[str, list[str]] = {}
    for tag in re.findall(r"<input[^>]*>", form):
        name = re.search(r'name="([^"]+)"', tag)
        value = re.search(r'value="([^"]*)"', tag)
        if name and name.group(1) != "csrfmiddlewaretoken":
            fields.setdefault(name.group(1), []).append(value.group(1) if value else "on")
    return fields


def preview_and_dispatch(browser, selection: dict):
    """What an operator does: preview the selection, tick the confirmation, dispatch (the 303)."""
    _, page = preview(browser, selection)
    assert f'action="{DISPATCH}"' in page, re.sub(r"<[^>]+>", " ", page)[-1500:]
    return post(browser, DISPATCH, form_fields(page, DISPATCH))
