"""Hypothesis profiles of the suite: `ci` (as thorough as CI has always been) and `dev` (a fifth of
the examples, for a quick local run).

The profile is `FLEET_HYPOTHESIS_PROFILE` when set (`ci` or `dev`); otherwise `ci` where Hypothesis
itself detects CI (the `CI` variable set, as in `CI=true bash .ci/run`, or a CI vendor's own), else
`dev`.

`ci` is Hypothesis's own built-in `ci` profile unchanged (100 examples by default, derandomized,
no deadline, no example database): what every CI run has used. A test that needs more or fewer
examples than the profile's default asks for `examples(n)`: `n` under `ci` exactly, scaled like the
default under `dev` (never fewer than `DEV_FLOOR`).
"""

from __future__ import annotations

import os

from hypothesis import settings

ENV = "FLEET_HYPOTHESIS_PROFILE"
PROFILES = ("ci", "dev")
#: The default number of examples per test under `dev` (Hypothesis's default, and `ci`'s, is 100).
DEV_MAX_EXAMPLES = 20
DEV_FLOOR = 10

#: Read before anything here loads a profile: Hypothesis loads its `ci` profile at import when it detects CI.
_DETECTED_CI = settings.get_current_profile_name() == "ci"
settings.register_profile("ci", settings.get_profile("ci"))
settings.register_profile("dev", settings.get_profile("default"), max_examples=DEV_MAX_EXAMPLES)


def chosen() -> str:
    named = os.environ.get(ENV, "").strip()
    if named:
        if named not in PROFILES:
            raise ValueError(f"{ENV}={named!r}: expected one of {', '.join(PROFILES)}")
        return named
    return "ci" if _DETECTED_CI else "dev"


def load() -> str:
    """Load the chosen profile; returns its name."""
    name = chosen()
    settings.load_profile(name)
    return name


def examples(ci_count: int) -> int:
    """`max_examples` for a test that runs `ci_count` examples under the `ci` profile."""
    ci_default = settings.get_profile("ci").max_examples
    active = settings().max_examples
    if active == ci_default:
        return ci_count
    return max(DEV_FLOOR, round(ci_count * active / ci_default))
