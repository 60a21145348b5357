"""`fleet_rules.fingerprint`: the canonical form and hash of an inventory, the changes between two
in words (which supersede a certificate, which are only readings), and a repair's parts checked
against the hardware read after it. No database."""

from __future__ import annotations

import copy
import json

import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet_rules import fingerprint as fp
from fleet_rules.vocabulary import RepairPartCheck
from tests.payloads import inventory

texts = st.one_of(st.none(), st.text(max_size=12))
gpus_strategy = st.lists(st.fixed_dictionaries({name: texts for name, _ in fp.GPU_FIELDS}), max_size=6)
inventories = st.fixed_dictionaries(
    {
        "driver_version": texts,
        "cuda_version": texts,
        "gpus": gpus_strategy,
        "hcas": st.lists(
            st.fixed_dictionaries(
                {
                    "name": st.text(min_size=1, max_size=8),
                    "firmware_version": texts,
                    "node_guid": texts,
                    "ports": st.lists(
                        st.fixed_dictionaries(
                            {
                                "port": st.integers(1, 4),
                                "state": texts,
                                "rate_gbps": st.one_of(st.none(), st.integers(0, 800)),
                            }
                        ),
                        max_size=2,
                    ),
                }
            ),
            max_size=3,
        ),
        "host": st.fixed_dictionaries({"bios_version": texts, "system_serial": texts}),
        "missing": st.lists(st.text(max_size=10), max_size=2),
    }
)


# --- canonical form and hash ----------------------------------------------------------------------


@settings(max_examples=60)
@given(inventories)
def test_the_canonical_form_is_rfc8785_of_the_normalised_inventory(value):
    assert fp.canonical(value) == rfc8785.dumps(fp.normalised(value))


@settings(max_examples=60)
@given(inventories)
def test_the_hash_does_not_depend_on_how_the_json_was_spelled(value):
    # Given the same inventory written with its keys in another order and parsed again
    respelled = json.loads(json.dumps(value, sort_keys=True, indent=3))
    # Then the hash is the same
    assert fp.sha256(respelled) == fp.sha256(value)


def test_an_absent_member_hashes_as_its_null_or_empty_reading():
    full = inventory(gpus=0, hcas=[], missing=[], host={"bios_version": None, "system_serial": None})
    full |= {"driver_version": None, "cuda_version": None}
    assert fp.sha256({}) == fp.sha256(full)


def test_the_hash_moves_with_one_serial():
    swapped = inventory()
    swapped["gpus"][3]["serial"] = "1653020000003"
    assert fp.sha256(swapped) != fp.sha256(inventory())
    assert len(fp.sha256(swapped)) == 64


# --- changes ----------------------------------------------------------------------------------------


@settings(max_examples=60)
@given(inventories)
def test_an_inventory_has_no_changes_against_itself(value):
    assert fp.changes(value, copy.deepcopy(value)) == []


@settings(max_examples=60)
@given(inventories, inventories)
def test_two_inventories_with_one_hash_have_no_changes(a, b):
    if fp.sha256(a) == fp.sha256(b):
        assert fp.changes(a, b) == []


@settings(max_examples=60)
@given(inventories, inventories)
def test_the_changes_that_supersede_are_symmetric_in_number_of_gpus_added_and_removed(a, b):
    # Given two inventories, the GPUs one side adds are the ones the other removes
    forward = [c.text for c in fp.changes(a, b) if c.part == "gpu" and (" added " in c.text)]
    backward = [c.text for c in fp.changes(b, a) if c.part == "gpu" and (" removed " in c.text)]
    assert len(forward) == len(backward)


@given(st.integers(0, 7), st.text(alphabet="0123456789", min_size=13, max_size=13))
def test_a_swapped_gpu_is_one_change_naming_its_index_and_both_serials(index, serial):
    before = inventory()
    after = copy.deepcopy(before)
    after["gpus"][index]["serial"] = serial
    found = fp.changes(before, after)
    if serial == before["gpus"][index]["serial"]:
        assert found == []
        return
    (change,) = found
    assert change.supersedes and change.part == "gpu"
    assert change.text == (
        f"GPU {index} ({before['gpus'][index]['pci_bus_id']}) serial {before['gpus'][index]['serial']} → {serial}"
    )


def test_a_gpu_fallen_off_the_bus_is_a_removal_that_supersedes():
    before = inventory()
    after = copy.deepcopy(before)
    lost = after["gpus"].pop(5)
    (change,) = fp.changes(before, after)
    assert change.supersedes
    assert change.text == f"GPU 5 ({lost['pci_bus_id']}) removed (serial {lost['serial']})"


def test_driver_vbios_and_hca_firmware_changes_supersede():
    after = inventory(driver_version="560.35.03", cuda_version="12.6")
    after["gpus"][0]["vbios_version"] = "96.00.99.00.01"
    after["hcas"][1]["firmware_version"] = "28.40.1000"
    found = fp.changes(inventory(), after)
    assert [c.text for c in found] == [
        "driver 550.54.15 → 560.35.03",
        "CUDA 12.4 → 12.6",
        "GPU 0 (00000000:18:00.0) VBIOS 96.00.89.00.01 → 96.00.99.00.01",
        "HCA mlx5_1 firmware 28.39.1002 → 28.40.1000",
    ]
    assert all(c.supersedes for c in found)


def test_a_port_going_down_is_recorded_but_does_not_supersede():
    after = inventory()
    after["hcas"][0]["ports"][0] |= {"state": "Down", "rate_gbps": 0}
    found = fp.changes(inventory(), after)
    assert [c.text for c in found] == [
        "HCA mlx5_0 port 1 state Active → Down",
        "HCA mlx5_0 port 1 rate (Gb/s) 400 → 0",
    ]
    assert not any(c.supersedes for c in found)
    assert fp.supersedes(inventory(), after) == []


def test_what_could_not_be_read_is_unknown_not_a_change_of_hardware():
    # Given ibstat failing on the next job: no HCAs read, the reason named in missing
    after = inventory(hcas=[], missing=["ibstat: command not found"])
    after["gpus"][2]["serial"] = None  # and one serial unreadable
    found = fp.changes(inventory(), after)
    assert [c.text for c in found] == [
        "GPU 2 (00000000:38:00.0) serial 1652020000002 → unreadable",
        "HCAs unreadable now (was 2)",
        "could not read: ibstat: command not found",
    ]
    assert not any(c.supersedes for c in found)
    # And reading them again is not a change either
    assert fp.supersedes(after, inventory()) == []


def test_hcas_gone_without_a_failed_reading_are_removed():
    found = fp.supersedes(inventory(), inventory(hcas=[]))
    assert [c.text for c in found] == [
        "HCA mlx5_0 removed (node GUID 0xa088c20300000000)",
        "HCA mlx5_1 removed (node GUID 0xa088c20300000001)",
    ]


def test_a_gpu_in_another_slot_is_one_removed_and_one_added():
    after = inventory()
    after["gpus"][7]["pci_bus_id"] = "00000000:F8:00.0"
    texts_found = [c.text for c in fp.changes(inventory(), after)]
    assert texts_found == [
        "GPU 7 (00000000:88:00.0) removed (serial 1652020000007)",
        "GPU 7 (00000000:F8:00.0) added (serial 1652020000007)",
    ]


def test_long_and_hostile_values_are_cut_in_the_text():
    after = inventory()
    after["gpus"][0]["serial"] = "<script>" + "x" * 200
    (change,) = fp.changes(inventory(), after)
    assert len(change.text) < 200 and change.text.endswith("…")
    assert fp.summary([change] * 20, limit=100).endswith("…")
    assert len(fp.summary([change] * 20, limit=100)) == 100


def test_hardware_supersedes_compares_with_the_bound_fingerprint_first():
    swapped = inventory()
    swapped["gpus"][3]["serial"] = "1653020000003"
    # The certificate binds the swapped hardware already: the new reading (same) changes nothing
    assert fp.hardware_supersedes(bound=swapped, previous=inventory(), new=swapped) == []
    # A certificate from before fingerprints: against the reading before
    assert len(fp.hardware_supersedes(bound=None, previous=inventory(), new=swapped)) == 1
    # The first fingerprint of a device has nothing to compare with
    assert fp.hardware_supersedes(bound=None, previous=None, new=swapped) == []


# --- repairs ----------------------------------------------------------------------------------------


def test_a_repairs_parts_checked_against_the_fingerprint_after_it():
    after = inventory()
    after["gpus"][3]["serial"] = "1653020000003"
    parts = [
        {"kind": "gpu", "slot": "3", "removed_serial": "1652020000003", "installed_serial": " 1653020000003 "},
        {"kind": "gpu", "slot": "4", "removed_serial": "1652020000004", "installed_serial": "1653020000004"},
        {"kind": "psu", "slot": "1", "removed_serial": "", "installed_serial": ""},
        {
            "kind": "gpu",
            "slot": "5",
            "removed_serial": "",
            "installed_serial": "gpu-00000005-AAAA-bbbb-cccc-000000000000",
        },
    ]
    checks = fp.repair_check(parts, after)
    assert [c.outcome for c in checks] == [
        RepairPartCheck.SEEN,
        RepairPartCheck.REMOVED_STILL_SEEN,  # the technician's record says slot 4 changed; it did not
        RepairPartCheck.NO_SERIAL,
        RepairPartCheck.SEEN,  # a UUID, in another case, names the GPU too
    ]
    assert fp.repair_mismatch(checks)
    assert checks[1].text == "gpu 4: removed 1652020000004 is still reported"
    assert not fp.repair_mismatch(fp.repair_check(parts[:1], after))
    assert [c.outcome for c in fp.repair_check(parts[:1], None)] == [RepairPartCheck.NOT_READ_YET]
    assert [c.outcome for c in fp.repair_check([parts[1] | {"removed_serial": ""}], after)] == [
        RepairPartCheck.NOT_SEEN
    ]
