"""One reach rule — read from the sources, as `tests/lifecycle/test_one_writer.py` reads them.

Which sites and devices a principal may see or write is decided in `fleet.inventory.identity`
(`reach`, `restrict`, `ensure_reaches`, `ensure_site_allowed`, `ensure_acts_as_satellite`, …). No
other module works it out by hand: it does not read the caller's satellite or site
(`actor.satellite`, `request.user.site_id`, `caller_satellite(…)`), does not tell a satellite's
client by its class (`isinstance(…, ClientPrincipal)`), does not take a reach apart
(`reach(actor).site_id`) to filter or compare with, and does not compare two satellite ids (the
shape of "is this job the caller's satellite's?"). Who is calling is established by the
authentication modules, which are allowed to build the principal.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import fleet

SRC = Path(fleet.__file__).parent
#: The rule itself, and the modules that establish who is calling.
RULE = "inventory/identity.py"
WHO_IS_CALLING = {"inventory/authentication.py", "inventory/oauth_validator.py"}
#: Comparisons of satellite ids that are not about a caller, each with why.
NOT_A_CALLER = {
    "fleetfile/apply.py": "a fleet file moving a topology to another satellite: no caller's reach involved",
}
#: Names the caller goes by in views, selectors and services.
CALLER_ROOTS = {"actor", "principal", "caller"}
#: What a principal carries about where it belongs.
WHERE_ATTRIBUTES = {"satellite", "satellite_id", "site", "site_id"}
#: Helpers of the rule that only the rule may call.
PRIVATE_HELPERS = {"caller_satellite", "site_restriction"}


def _dotted(node: ast.expr) -> str:
    """`request.user.satellite` for that expression; '' when it is not a plain dotted name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return ""


def _is_caller(node: ast.expr) -> bool:
    dotted = _dotted(node)
    return dotted in CALLER_ROOTS or dotted.endswith("request.user")


def _is_reach_call(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "reach"


def _satellite_id(node: ast.expr) -> bool:
    dotted = _dotted(node)
    return dotted.endswith(("satellite_id", "satellite.id"))


def offences(path: str, source: str) -> list[str]:
    """Every place this module decides a caller's reach by hand (`path:line what`)."""
    if path == RULE or path in WHO_IS_CALLING:
        return []
    tree = ast.parse(source, path)
    reach_names = {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and _is_reach_call(node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    found: list[str] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Attribute) and node.attr in WHERE_ATTRIBUTES:
            if _is_caller(node.value):
                found.append(f"{path}:{line} reads the caller's {node.attr} (ask fleet.inventory.identity)")
            elif _is_reach_call(node.value) or (isinstance(node.value, ast.Name) and node.value.id in reach_names):
                found.append(f"{path}:{line} takes a reach apart ({node.attr}): use restrict / ensure_reaches")
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if name in PRIVATE_HELPERS:
                found.append(f"{path}:{line} calls {name} (the rule's own helper)")
            if name == "isinstance" and any(_dotted(a).endswith("ClientPrincipal") for a in node.args[1:]):
                found.append(f"{path}:{line} tells a satellite's client by its class")
        if (
            isinstance(node, ast.Compare)
            and path not in NOT_A_CALLER
            and sum(_satellite_id(side) for side in [node.left, *node.comparators]) >= 2
        ):
            found.append(f"{path}:{line} compares satellite ids by hand (ensure_reaches(actor, satellite_id=…))")
    return found


def _sources() -> Iterator[tuple[str, str]]:
    for path in sorted(SRC.rglob("*.py")):
        if "migrations" not in path.parts:
            yield str(path.relative_to(SRC)), path.read_text()


def test_no_module_but_the_identity_decides_a_callers_reach():
    found = [offence for path, source in _sources() for offence in offences(path, source)]
    assert not found, f"which sites and devices a caller reaches is decided in fleet.inventory.identity: {found}"


#: Hand checks this codebase used to make (issue 34: 14 of them across 11 modules), each planted.
PLANTED = [
    (
        "inventory/scoping.py",
        "restricted = site_restriction(request.user)\nif restricted is not None:\n"
        "    qs = qs.filter(site_id=restricted)\n",
    ),
    ("burnin/api/evidence_views.py", "if caller_satellite(request.user) is not None:\n    raise Denied()\n"),
    ("jobs/services.py", "if satellite_id is not None and job.satellite_id != satellite_id:\n    raise Denied()\n"),
    ("burnin/selectors.py", "if actor.satellite.site_id != site.id:\n    raise Denied()\n"),
    ("dashboard/views.py", "own = self.request.user.satellite\n"),
    ("policies/api/views.py", "qs = qs.filter(site_id=reach(self.request.user).site_id)\n"),
    ("burnin/fingerprints.py", "where = reach(actor)\nqs = qs.filter(site_id=where.site_id)\n"),
    ("core/permissions.py", "if isinstance(request.user, ClientPrincipal):\n    pass\n"),
]


@pytest.mark.parametrize(("path", "planted"), PLANTED, ids=[p for p, _ in PLANTED])
def test_a_planted_hand_check_fails_the_walk(path, planted):
    assert offences(path, planted), planted


def test_the_rules_own_module_and_its_users_pass():
    assert offences(RULE, "if caller_satellite(actor) is not None:\n    pass\n") == []
    uses = (
        "qs = restrict(Device.objects.all(), actor)\nensure_reaches(actor, device_ids=[d.id])\nwhere = reach(actor)\n"
    )
    assert offences("burnin/executions.py", uses + "ok = where.writes_for(row.serving_satellite_id)\n") == []
