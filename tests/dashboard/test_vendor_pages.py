"""The vendor where it matters: the site page names each class's GPU vendor, the device page an AMD device's
(and says "amdgpu event", not "Xid", when one sent it to repair), the certificate page the GPUs it binds, and the
evidence pack's manifest the class's vendor."""

from __future__ import annotations

import io
import json
import zipfile

from fleet.burnin.evidence.pack import evidence_pack_build
from fleet.inventory.models import Device
from fleet_rules.gpu_vendors import gpus_in_words, vendor_words
from fleet_rules.vocabulary import DeviceState, GpuVendor
from tests.dashboard import test_browser as harness
from tests.dashboard.conftest import VIEWER

AMD_RC, NVIDIA_RC = "gpu.mi300x.8x", "gpu.h200.8x"
RESET = {
    "kind": "amdgpu",
    "code": 4,
    "pci_bus_id": "0000:05:00.0",
    "message": "GPU reset begin!",
    "at": "2026-11-30T10:12:00Z",
}


def amd_window() -> dict:
    return {
        "window": {"since": "2026-11-30T10:00:00Z", "until": "2026-11-30T10:30:00Z"},
        "source": "journalctl",
        "xid_events": [RESET],
        "ecc": {"before": {"ecc_uncorrected": 0}, "after": {"ecc_uncorrected": 0}},
        "throttle_reasons_seen": [],
    }


def test_vendor_words_and_the_gpus_of_an_inventory():
    assert vendor_words(GpuVendor.AMD) == "AMD GPUs" and vendor_words("") == ""
    gpus = [{"product_name": "AMD Instinct MI300X"}] * 8 + [{"product_name": None}]
    assert gpus_in_words({"gpus": gpus}) == "8 × AMD Instinct MI300X, 1 × unnamed GPU"
    assert gpus_in_words(None) == ""


def test_the_site_and_device_pages_name_the_vendor_and_an_amdgpu_event_that_sent_it_to_repair(fleet, person):
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-c")
    amd = fleet.policy(AMD_RC)
    amd.gpu_vendor = GpuVendor.AMD
    amd.save(update_fields=["gpu_vendor"])
    fleet.requirement(fleet.policy(NVIDIA_RC), "gpu-diag", test="dcgm-diag")
    window = fleet.requirement(
        amd,
        "gpu-health-window",
        test="health-window",
        thresholds=[{"metric": "amdgpu_ras_fatal_count", "comparator": "eq", "threshold": 0}],
    )
    device = fleet.device(satellite, AMD_RC, hostname="c01-n01")
    fleet.device(satellite, NVIDIA_RC, hostname="a01-n01")
    fleet.execution(window, device=device, health=amd_window(), metrics={"amdgpu_ras_fatal_count": {"value": 1}})
    viewer = person(VIEWER)

    site_page = viewer.get("/sites/lon-1/").content.decode()
    device_page = viewer.get("/sites/lon-1/devices/c01-n01/").content.decode()

    assert Device.objects.get(id=device.id).state == DeviceState.NEEDS_REPAIR
    assert '<span class="vendor" data-gpu-vendor="amd">· AMD GPUs</span>' in site_page
    assert '<span class="vendor" data-gpu-vendor="nvidia">· NVIDIA GPUs</span>' in site_page
    assert '<span class="vendor" data-gpu-vendor="amd">· AMD GPUs</span>' in device_page
    assert "✗ Fatal amdgpu event logged" in device_page
    assert "amdgpu event (GPU reset) on 0000:05:00.0 at 2026-11-30T10:12:00Z" in device_page


def test_the_evidence_pack_of_an_amd_device_names_its_vendor(fleet):
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-c")
    amd = fleet.policy(AMD_RC)
    amd.gpu_vendor = GpuVendor.AMD
    amd.save(update_fields=["gpu_vendor"])
    device = fleet.device(satellite, AMD_RC, hostname="c01-n01")

    pack = evidence_pack_build(device_id=device.id, generated_by="test")

    manifest = json.loads(zipfile.ZipFile(io.BytesIO(pack.content)).read("manifest.json"))
    assert manifest["policy"]["resource_class"] == AMD_RC and manifest["policy"]["gpu_vendor"] == "amd"


# --- in a real browser ------------------------------------------------------------------------------

chromium, site_served, tab = harness.chromium, harness.site_served, harness.tab


def test_in_a_browser_the_site_names_each_class_s_vendor_and_leads_to_an_amd_device(tab):
    visit, world = tab
    page = visit.page
    amd = world.fleet.policy(AMD_RC)
    amd.gpu_vendor = GpuVendor.AMD
    amd.save(update_fields=["gpu_vendor"])
    world.fleet.requirement(amd, "rvs-stress", test="rvs-stress")
    world.fleet.device(world.satellite, AMD_RC, hostname="c01-n01")

    visit.sign_in("viewer")
    visit.go("/sites/lon-1/", "site-vendors")
    amd_class = page.locator(f'section.resource-class[data-resource-class="{AMD_RC}"] h2')
    assert "· AMD GPUs" in amd_class.inner_text()
    nvidia_class = page.locator(f'section.resource-class[data-resource-class="{NVIDIA_RC}"] h2')
    assert "· NVIDIA GPUs" in nvidia_class.inner_text()
    visit.go("/sites/lon-1/devices/c01-n01/", "amd-device")
    assert "gpu.mi300x.8x · AMD GPUs" in page.inner_text("table.identity")
