"""Issue 34, defects 2, 3 and 5: what three pages say is true and in the dashboard's words — the
grid's verdict filter shows only rows with a cell of that verdict, the rerun preview shows
parameters as the definition list used elsewhere (never a Python dict), and the execution page
shows the reason the evaluator posted with its result."""

from __future__ import annotations

import html
import re

from fleet.burnin.models import TestExecution
from tests.dashboard.conftest import OPERATOR, RC, VIEWER, preview
from tests.dashboard.test_pages import text


def _rows(page: str) -> dict[str, list[str]]:
    """Each grid row's hostname → the verdicts of its cells."""
    rows = {}
    for hostname, body in re.findall(r'<tr data-hostname="([^"]+)">(.*?)</tr>', page, re.S):
        rows[hostname] = re.findall(r'data-verdict="([^"]*)"', body)
    return rows


def test_the_grid_filtered_by_a_verdict_shows_only_rows_with_a_cell_of_that_verdict(person, burnt_in):
    # Given a spare racked in rack a01 (whose collective errored) but not enrolled: no burn-in
    # target, so none of its cells has a verdict, and a rack-mate of it that errored nothing itself.
    spare = burnt_in.fleet.device(
        burnt_in.satellite, RC, hostname="a01-spare", enrolled=False, topologies=[burnt_in.racks[1]]
    )
    viewer = person(VIEWER)

    for verdict in ("errored", "failed"):
        rows = _rows(text(viewer.get(f"/sites/lon-1/grid/?resource_class={RC}&verdict={verdict}")))

        assert rows, verdict
        not_it = {host: cells for host, cells in rows.items() if verdict not in cells}
        assert not not_it, f"?verdict={verdict} shows rows without a {verdict} cell: {not_it}"
    assert spare.hostname not in _rows(text(viewer.get(f"/sites/lon-1/grid/?resource_class={RC}&verdict=errored")))


def test_the_rerun_preview_shows_parameters_as_a_definition_list_not_a_python_dict(person, burnt_in):
    operator = person(OPERATOR)

    _, page = preview(operator, {"device": [str(burnt_in.devices[0].id)], "mode": "all"})

    assert "{'" not in html.unescape(page) and "{&#x27;" not in page  # no dict repr, escaped or not
    assert re.search(r"<dl class=\"parameters[^\"]*\"><dt>level</dt><dd>3</dd></dl>", page), page
    assert "dcgm-diag" in page or "gpu-diag" in page


def test_the_execution_page_shows_the_reason_the_evaluator_posted(person, burnt_in):
    failing = TestExecution.objects.select_related("evaluation").get(
        device__hostname=burnt_in.failing[0], requirement__name="hbm-bandwidth"
    )
    posted = failing.evaluation.reason
    assert posted  # the agent's evaluator says why it failed

    page = text(person(VIEWER).get(f"/executions/{failing.id}/"))

    assert 'class="posted-reason"' in page
    assert html.escape(posted) in page or posted in page


def test_an_isolation_round_s_job_says_what_its_collectives_found_not_that_nothing_was_reported(fleet):
    from fleet.burnin.diagnosis.isolation import isolation_dispatch
    from fleet.burnin.reads.outcomes import job_outcomes
    from fleet.jobs.models import Job
    from tests.diagnosis.test_isolation import Rack

    rack = Rack(fleet)
    isolation_dispatch(site=rack.site, topology_id=rack.rack.id, requirement_name="rack-nccl", requested_by="op")
    rack.run_round()  # the agent's part: each half's collective reported, the job finished, evaluated

    jobs = list(Job.objects.filter(reason="diagnosis").prefetch_related("job_devices"))
    words = sorted(outcome.words for outcome in job_outcomes(jobs).values())

    assert words == ["finished — 1 of 1 test failed", "finished — passed"], words
