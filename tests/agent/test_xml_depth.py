"""Issue 42 (8): `nvidia-smi -q -x` output nested absurdly deep (2 million levels, 14 MB, parsed in
5–6 s before it was judged) is refused as soon as the depth passes
`fleet_agent.parsers.nvidia_smi_xml.MAX_XML_DEPTH`: a real report nests about six levels."""

from __future__ import annotations

import time

import pytest

from fleet_agent.parsers import ParseError, nvidia_smi_xml


def nested(levels: int) -> str:
    return "<nvidia_smi_log>" + "<a>" * levels + "</a>" * levels + "</nvidia_smi_log>"


def test_deeply_nested_xml_is_refused_early_naming_the_limit():
    text = nested(1_000_000)  # 7 MB, under the byte limit
    started = time.monotonic()

    with pytest.raises(ParseError, match=f"deeper than {nvidia_smi_xml.MAX_XML_DEPTH} levels"):
        nvidia_smi_xml.safe_xml_root(text)

    assert time.monotonic() - started < 0.5


def test_the_limit_is_far_above_a_real_report_and_holds_exactly():
    assert 64 <= nvidia_smi_xml.MAX_XML_DEPTH <= 1000
    assert (
        nvidia_smi_xml.safe_xml_root(nested(nvidia_smi_xml.MAX_XML_DEPTH - 1)).tag == "nvidia_smi_log"
    )  # the root is one level
    with pytest.raises(ParseError):
        nvidia_smi_xml.safe_xml_root(nested(nvidia_smi_xml.MAX_XML_DEPTH))
