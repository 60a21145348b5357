"""No module of the service, the rules or the agent over 600 lines (migrations, which are generated,
aside): a module that large holds several things a reader must tell apart."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LIMIT = 600


def test_no_module_is_over_600_lines():
    sources = [
        *(REPO / "src").rglob("*.py"),
        *(REPO / "rules" / "src").rglob("*.py"),
        *(REPO / "agent" / "src").rglob("*.py"),
    ]
    large = {
        str(path.relative_to(REPO)): n
        for path in sources
        if "migrations" not in path.parts and (n := len(path.read_text().splitlines())) > LIMIT
    }
    assert sources and not large, large
