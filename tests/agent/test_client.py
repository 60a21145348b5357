"""The agent's HTTP client against a scripted transport: tokens, retries, Retry-After."""

from __future__ import annotations

import httpx
import pytest

from fleet_agent.client import ApiError, FleetClient, Unreachable


class Script:
    """Answers requests from a list of (status, body, headers) per path; records what it saw."""

    def __init__(self, answers: dict[str, list]) -> None:
        self.answers = {path: list(replies) for path, replies in answers.items()}
        self.seen: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        if request.url.path == "/o/token/":
            return httpx.Response(200, json={"access_token": f"t{len(self.seen)}", "expires_in": 3600})
        reply = self.answers[request.url.path].pop(0)
        if isinstance(reply, Exception):
            raise reply
        status, body, headers = (reply + ({},))[:3] if isinstance(reply, tuple) else (reply, {}, {})
        return httpx.Response(status, json=body, headers=headers)


def client_for(script: Script, sleeps: list) -> FleetClient:
    return FleetClient(
        "http://fleet", "id", "secret", transport=httpx.MockTransport(script), max_retries=3, sleep=sleeps.append
    )


def test_a_token_is_fetched_once_and_sent_as_bearer():
    script = Script({"/api/v1/jobs/claim/": [(200, {"jobs": []}), (200, {"jobs": []})]})
    client = client_for(script, [])
    client.claim("lon-1", "sat-a", 2)
    client.claim("lon-1", "sat-a", 2)
    tokens = [r for r in script.seen if r.url.path == "/o/token/"]
    assert len(tokens) == 1 and tokens[0].headers["Authorization"].startswith("Basic ")
    assert script.seen[-1].headers["Authorization"] == "Bearer t1"


def test_a_401_fetches_a_new_token_once():
    script = Script({"/api/v1/jobs/claim/": [(401, {"code": "authentication_failed"}), (200, {"jobs": [1]})]})
    assert client_for(script, []).claim("lon-1", "sat-a", 1) == [1]
    assert sum(r.url.path == "/o/token/" for r in script.seen) == 2


def test_5xx_and_connection_errors_are_retried_with_growing_jittered_delays():
    counts = {"written": 1, "unchanged": 0, "stale": 0, "invalid": 0}
    script = Script(
        {
            "/api/v1/burn-in/evaluations/results/": [
                httpx.ReadTimeout("slow"),
                (503, {"code": "service_unavailable"}),
                (502, {}),
                (200, counts),
            ]
        }
    )
    sleeps: list[float] = []
    assert client_for(script, sleeps).upsert_results([]) == counts
    assert len(sleeps) == 3
    assert 0.25 <= sleeps[0] <= 0.5 and 0.5 <= sleeps[1] <= 1.0 and 1.0 <= sleeps[2] <= 2.0


def test_429_waits_for_retry_after():
    script = Script({"/api/v1/jobs/claim/": [(429, {"code": "throttled"}, {"Retry-After": "7"}), (200, {"jobs": []})]})
    sleeps: list[float] = []
    client_for(script, sleeps).claim("lon-1", "sat-a", 1)
    assert sleeps == [7.0]


def test_4xx_is_final_and_carries_the_error_body():
    body = {"detail": "Invalid input", "code": "invalid", "field_errors": [{"field": "cursor", "messages": ["x"]}]}
    script = Script({"/api/v1/burn-in/policy-progress/reconcile/": [(400, body)]})
    with pytest.raises(ApiError) as caught:
        client_for(script, []).reconcile("lon-1", "sat-a", "gpu", 10, "c")
    assert caught.value.status == 400 and caught.value.field_errors() == {"cursor": ["x"]}


def test_retries_run_out():
    script = Script({"/api/v1/jobs/claim/": [httpx.ConnectError("refused")] * 4})
    with pytest.raises(Unreachable):
        client_for(script, []).claim("lon-1", "sat-a", 1)


def test_a_claim_that_may_have_taken_effect_is_not_retried():
    script = Script({"/api/v1/jobs/claim/": [httpx.ReadTimeout("slow"), (200, {"jobs": [1]})]})
    with pytest.raises(Unreachable):
        client_for(script, []).claim("lon-1", "sat-a", 1)
    script = Script({"/api/v1/jobs/claim/": [(502, {}), (200, {"jobs": [1]})]})
    with pytest.raises(ApiError):
        client_for(script, []).claim("lon-1", "sat-a", 1)


def test_a_claim_that_surely_did_not_take_effect_is_retried():
    script = Script({"/api/v1/jobs/claim/": [httpx.ConnectError("refused"), (503, {}), (200, {"jobs": [1]})]})
    assert client_for(script, []).claim("lon-1", "sat-a", 1) == [1]
