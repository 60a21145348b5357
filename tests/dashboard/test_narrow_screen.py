"""The dashboard on a phone-sized screen (390 px wide, in Chromium): the header's band holds its own
text, the page is never wider than the screen (wide tables scroll inside it), the signed-in user
and role are legible, and names never break at their hyphens."""

from __future__ import annotations

import pytest

from tests.dashboard.test_browser import Visit, chromium, site_served  # noqa: F401 - fixtures

WIDTH = 390

#: The contrast ratio (WCAG 2) of the header's user/role text on what is behind it.
_CONTRAST = """() => {
  const lum = (rgb) => {
    const [r, g, b] = rgb.match(/\\d+/g).slice(0, 3).map(Number).map((c) => {
      c /= 255; return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const who = document.querySelector('header.top .who');
  const header = document.querySelector('header.top');
  const fg = lum(getComputedStyle(who).color), bg = lum(getComputedStyle(header).backgroundColor);
  const inside = who.getBoundingClientRect().bottom <= header.getBoundingClientRect().bottom
    && who.getBoundingClientRect().right <= header.getBoundingClientRect().right;
  return {ratio: (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05), inside};
}"""

#: Links to devices, sites and racks whose text wraps onto a second line.
_BROKEN_NAMES = """() => [...document.querySelectorAll('main a')]
  .filter((a) => /^[a-z0-9]+(-[a-z0-9]+)+$/i.test(a.innerText.trim()) && a.getClientRects().length > 1)
  .map((a) => a.innerText)"""


@pytest.fixture
def narrow_tab(chromium, site_served, request):  # noqa: F811 - the imported fixtures
    world, base = site_served
    context = chromium.new_context(viewport={"width": WIDTH, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield Visit(page, base, "narrow-" + request.node.name.removeprefix("test_")[:50]), world
    context.close()


def test_every_page_fits_a_390_px_screen(narrow_tab):
    visit, world = narrow_tab
    visit.sign_in("operator")
    device = sorted(world.failing)[0] if world.failing else "a01-n01"
    for path, what in [
        ("/", "overview"),
        ("/sites/lon-1/", "site"),
        ("/sites/lon-1/grid/", "grid"),
        ("/sites/lon-1/failures/", "failures"),
        (f"/sites/lon-1/devices/{device}/", "device"),
        ("/jobs/", "jobs"),
    ]:
        visit.go(path, what)
        page = visit.page
        assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH, f"{path} is wider than the screen"
        header = page.evaluate("document.querySelector('header.top').getBoundingClientRect().width")
        assert header >= WIDTH - 1, f"{path}: the header's band stops at {header} px"
        legible = page.evaluate(_CONTRAST)
        assert legible["inside"], f"{path}: the user and role sit outside the header's band"
        assert legible["ratio"] >= 4.5, f"{path}: user and role text contrast {legible['ratio']:.1f} < 4.5"
        assert page.evaluate(_BROKEN_NAMES) == [], f"{path}: names broken across lines"
