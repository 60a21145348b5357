"""NVIDIA's Xid and SXid catalogues as data: every code, what it means, and what it asks for at once.

An Xid is the NVIDIA driver's report of a GPU error in the kernel log; an SXid an NVSwitch's. NVIDIA's Xid
catalogue gives each code an *immediate resolution* (ignore, restart the application, reset the GPU, restart
the machine, contact support); the Fabric Manager guide sorts SXids into non-fatal, potentially fatal (to the
port's partition) and always fatal (to the fabric, until the host restarts). This module holds both, every code,
and turns each into one `XidResolution` step of fleet-burnin's ladder (none → restart_app → reset_gpu → reboot →
repair) and an `XidSeverity`. The correlation rule (`fleet_rules.xid_correlation`) judges a window's events with
them; docs/agent.md ("The Xid catalogue") prints the table.

The rows are the catalogue's words, kept as the sheet says them (`tests/rules/fixtures/xid_catalogue.json`
and `sxid_catalogue.json` hold the public sheets with their source and commit; a test checks every row).
Where fleet-burnin's step differs from the sheet's, `XID_POLICY` says so and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fleet_rules.vocabulary import XidResolution, XidSeverity

__all__ = [
    "SHEET_RESOLUTIONS",
    "SXID_CATALOGUE",
    "XID_CATALOGUE",
    "XID_POLICY",
    "CatalogueEntry",
    "catalogue_entry",
]

R = XidResolution
XID_SHEET = "NVIDIA Xid catalogue, https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
SXID_GUIDE = "NVIDIA Fabric Manager user guide, https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/"
A100_MEMORY_ERRORS = "NVIDIA GPU memory error management, https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/"

#: The sheet's immediate resolutions in fleet-burnin's steps. A step a person must take (contact support,
#: check the power cables, update software or firmware) is `repair`: no command on the node can do it.
SHEET_RESOLUTIONS: Mapping[str, XidResolution] = {
    "": R.NONE,  # the newest codes (162–172) carry none yet: informational until the sheet says otherwise
    "IGNORE": R.NONE,
    "XID_154": R.NONE,  # 154 reports that another Xid's recovery action changed: that Xid is judged itself
    "WORKFLOW_XID_45": R.NONE,  # 45 is preemptive cleanup after another error: follow the other Xid
    "RESTART_APP": R.RESTART_APP,
    "CHECK_UVM": R.RESTART_APP,  # the unified-memory driver's fault, not the GPU's
    "RESET_GPU": R.RESET_GPU,
    "WORKFLOW_XID_48": R.RESET_GPU,  # the double-bit ECC workflow: reset so the page is retired / row remapped
    "WORKFLOW_NVLINK_ERR": R.RESET_GPU,  # the NVLink workflows start with a GPU reset
    "WORKFLOW_NVLINK5_ERR": R.RESET_GPU,
    "RESTART_BM": R.REBOOT,  # restart the bare-metal machine
    "RESTART_VM": R.REBOOT,  # a burn-in runs on the bare metal: its "VM" is the node
    "CONTACT_SUPPORT": R.REPAIR,
    "CHECK_MECHANICALS": R.REPAIR,
    "UPDATE_SWFW": R.REPAIR,
}

#: Where fleet-burnin's step differs from the sheet's, and why.
XID_POLICY: Mapping[int, tuple[XidResolution, str]] = {
    63: (
        R.RESET_GPU,
        "a row remapping is pending until the GPU is reset (the sheet says ignore: in service the next reset "
        f"applies it); at burn-in the reset is done now and the burn-in run again ({A100_MEMORY_ERRORS})",
    ),
}

#: An Xid's severity follows the step it asks for.
_SEVERITY: Mapping[XidResolution, XidSeverity] = {
    R.NONE: XidSeverity.INFORMATIONAL,
    R.RESTART_APP: XidSeverity.APPLICATION,
    R.RESET_GPU: XidSeverity.RECOVERABLE,
    R.REBOOT: XidSeverity.RECOVERABLE,
    R.REPAIR: XidSeverity.FATAL,
}


@dataclass(frozen=True, slots=True)
class CatalogueEntry:
    """One code of a catalogue: the catalogue's words, and fleet-burnin's step and severity for it."""

    code: int
    mnemonic: str
    meaning: str
    sheet_resolution: str  # as the catalogue says it (Xid: the immediate resolution; SXid: the guide's class)
    resolution: XidResolution
    severity: XidSeverity
    source: str

    @property
    def recoverable(self) -> bool:
        """True when a step on the node (or nothing at all) may clear it: anything short of `repair`."""
        return self.resolution is not R.REPAIR


_XID_ROWS: tuple[tuple[int, str, str, str], ...] = (
    (1, "ROBUST_CHANNEL_FIFO_ERROR_FIFO_METHOD", "Unused", "CONTACT_SUPPORT"),
    (2, "ROBUST_CHANNEL_FIFO_ERROR_SW_METHOD", "Unused", "CONTACT_SUPPORT"),
    (3, "ROBUST_CHANNEL_FIFO_ERROR_UNK_METHOD", "Unused", "CONTACT_SUPPORT"),
    (4, "ROBUST_CHANNEL_FIFO_ERROR_CHANNEL_BUSY", "Unused", "CONTACT_SUPPORT"),
    (5, "ROBUST_CHANNEL_FIFO_ERROR_RUNOUT_OVERFLOW", "Unused", "CONTACT_SUPPORT"),
    (6, "ROBUST_CHANNEL_FIFO_ERROR_PARSE_ERR", "Unused", "CONTACT_SUPPORT"),
    (7, "ROBUST_CHANNEL_FIFO_ERROR_PTE_ERR", "Unused", "CONTACT_SUPPORT"),
    (8, "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "GPU stopped processing", "RESTART_APP"),
    (9, "ROBUST_CHANNEL_GR_ERROR_INSTANCE", "Unused", "CONTACT_SUPPORT"),
    (10, "ROBUST_CHANNEL_GR_ERROR_SINGLE_STEP", "Unused", "CONTACT_SUPPORT"),
    (11, "ROBUST_CHANNEL_GR_ERROR_MISSING_HW", "Invalid or corrupted push buffer stream", "RESTART_APP"),
    (12, "ROBUST_CHANNEL_GR_ERROR_SW_METHOD", "Unused", "CONTACT_SUPPORT"),
    (
        13,
        "ROBUST_CHANNEL_GR_EXCEPTION /\nROBUST_CHANNEL_GR_ERROR_SW_NOTIFY",
        "Graphics Engine Exception",
        "RESTART_APP",
    ),
    (14, "ROBUST_CHANNEL_FAKE_ERROR", "Unused", "IGNORE"),
    (15, "ROBUST_CHANNEL_SCANLINE_TIMEOUT", "Unused", "CONTACT_SUPPORT"),
    (16, "ROBUST_CHANNEL_VBLANK_CALLBACK_TIMEOUT", "Unused", "CONTACT_SUPPORT"),
    (17, "ROBUST_CHANNEL_PARAMETER_ERROR", "Unused", "CONTACT_SUPPORT"),
    (18, "ROBUST_CHANNEL_BUS_MASTER_TIMEOUT_ERROR", "Unused", "CONTACT_SUPPORT"),
    (19, "ROBUST_CHANNEL_DISP_MISSED_NOTIFIER", "Unused", "CONTACT_SUPPORT"),
    (20, "ROBUST_CHANNEL_MPEG_ERROR_SW_METHOD", "Unused", "CONTACT_SUPPORT"),
    (21, "ROBUST_CHANNEL_ME_ERROR_SW_METHOD", "Unused", "CONTACT_SUPPORT"),
    (22, "ROBUST_CHANNEL_VP_ERROR_SW_METHOD", "Unused", "CONTACT_SUPPORT"),
    (23, "ROBUST_CHANNEL_RC_LOGGING_ENABLED", "Unused", "CONTACT_SUPPORT"),
    (24, "ROBUST_CHANNEL_GR_SEMAPHORE_TIMEOUT", "Unused", "CONTACT_SUPPORT"),
    (25, "ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY", "Invalid or illegal push buffer stream", "RESTART_APP"),
    (26, "ROBUST_CHANNEL_FIFO_ERROR_FBISTATE_TIMEOUT", "Unused", "CONTACT_SUPPORT"),
    (27, "ROBUST_CHANNEL_VP_ERROR", "Unused", "CONTACT_SUPPORT"),
    (28, "ROBUST_CHANNEL_VP2_ERROR", "Unused", "CONTACT_SUPPORT"),
    (29, "ROBUST_CHANNEL_BSP_ERROR", "Unused", "CONTACT_SUPPORT"),
    (30, "ROBUST_CHANNEL_BAD_ADDR_ACCESS", "Unused", "CONTACT_SUPPORT"),
    (31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault", "RESTART_APP"),
    (32, "ROBUST_CHANNEL_PBDMA_ERROR", "Invalid or corrupted push buffer stream", "RESTART_APP"),
    (33, "ROBUST_CHANNEL_SEC_ERROR", "Unused", "CONTACT_SUPPORT"),
    (34, "ROBUST_CHANNEL_MSVLD_ERROR", "Unused", "CONTACT_SUPPORT"),
    (35, "ROBUST_CHANNEL_MSPDEC_ERROR", "Unused", "CONTACT_SUPPORT"),
    (36, "ROBUST_CHANNEL_MSPPP_ERROR", "Unused", "CONTACT_SUPPORT"),
    (37, "ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD", "Driver firmware error", "IGNORE"),
    (38, "ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "Driver firmware error", "IGNORE"),
    (39, "ROBUST_CHANNEL_CE0_ERROR", "Copy Engine Exception", "RESTART_APP"),
    (40, "ROBUST_CHANNEL_CE1_ERROR", "Copy Engine Exception", "RESTART_APP"),
    (41, "ROBUST_CHANNEL_CE2_ERROR", "Copy Engine Exception", "RESTART_APP"),
    (42, "ROBUST_CHANNEL_VIC_ERROR", "Unused", "CONTACT_SUPPORT"),
    (43, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing", "IGNORE"),
    (44, "ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW", "Graphics Engine fault during context switch", "IGNORE"),
    (
        45,
        "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL",
        "Preemptive cleanup, due to previous errors -- "
        "Most likely to see when running multiple cuda applications and hitting a DBE",
        "WORKFLOW_XID_45",
    ),
    (46, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped processing", "RESET_GPU"),
    (47, "ROBUST_CHANNEL_NVENC0_ERROR", "Unused", "CONTACT_SUPPORT"),
    (48, "ROBUST_CHANNEL_GPU_ECC_DBE", "Double Bit ECC Error", "WORKFLOW_XID_48"),
    (49, "SILENT_RUNNING_CONSTANT_LEVEL_SET_BY_REGISTRY", "Unused", "CONTACT_SUPPORT"),
    (50, "SILENT_RUNNING_LEVEL_TRANSITION_DUE_TO_RC_ERROR", "Unused", "CONTACT_SUPPORT"),
    (51, "SILENT_RUNNING_STRESS_TEST_FAILURE", "Unused", "CONTACT_SUPPORT"),
    (52, "SILENT_RUNNING_LEVEL_TRANS_DUE_TO_TEMP_RISE", "Unused", "CONTACT_SUPPORT"),
    (53, "SILENT_RUNNING_TEMP_REDUCED_CLOCKING", "Unused", "CONTACT_SUPPORT"),
    (
        54,
        "SILENT_RUNNING_PWR_REDUCED_CLOCKING",
        "Auxiliary power is not connected to the GPU board",
        "CHECK_MECHANICALS",
    ),
    (55, "SILENT_RUNNING_TEMPERATURE_READ_ERROR", "Unused", "CONTACT_SUPPORT"),
    (56, "DISPLAY_CHANNEL_EXCEPTION", "Unused", "CONTACT_SUPPORT"),
    (57, "FB_LINK_TRAINING_FAILURE_ERROR", "Unused", "CONTACT_SUPPORT"),
    (58, "FB_MEMORY_ERROR", "Unused", "CONTACT_SUPPORT"),
    (59, "PMU_ERROR", "Unused", "CONTACT_SUPPORT"),
    (60, "ROBUST_CHANNEL_SEC2_ERROR", "Video processor exception", "RESTART_APP"),
    (61, "PMU_BREAKPOINT", "Unused", "CONTACT_SUPPORT"),
    (62, "PMU_HALT_ERROR", "Internal micro-controller halt\n(newer drivers)", "RESET_GPU"),
    (63, "INFOROM_DRAM_RETIREMENT_EVENT", "GPU memory remapping event", "IGNORE"),
    (64, "INFOROM_DRAM_RETIREMENT_FAILURE", "GPU memory remapping failure", "RESET_GPU"),
    (65, "ROBUST_CHANNEL_NVENC1_ERROR", "Unused", "CONTACT_SUPPORT"),
    (66, "ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION", "Illegal access by driver", "IGNORE"),
    (67, "ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION", "Illegal access by driver", "IGNORE"),
    (68, "ROBUST_CHANNEL_NVDEC0_ERROR", "NVDEC0 Exception", "RESTART_APP"),
    (69, "ROBUST_CHANNEL_GR_CLASS_ERROR", "Graphics Engine class error", "RESTART_APP"),
    (70, "ROBUST_CHANNEL_CE3_ERROR", "CE3: Unknown Error", "RESTART_APP"),
    (71, "ROBUST_CHANNEL_CE4_ERROR", "CE4: Unknown Error", "RESTART_APP"),
    (72, "ROBUST_CHANNEL_CE5_ERROR", "CE5: Unknown Error", "RESTART_APP"),
    (73, "ROBUST_CHANNEL_NVENC2_ERROR", "Unused", "CONTACT_SUPPORT"),
    (74, "NVLINK_ERROR", "NVLINK Error", "WORKFLOW_NVLINK_ERR"),
    (75, "ROBUST_CHANNEL_CE6_ERROR", "CE6: Unknown Error", "RESTART_APP"),
    (76, "ROBUST_CHANNEL_CE7_ERROR", "CE7: Unknown Error", "RESTART_APP"),
    (77, "ROBUST_CHANNEL_CE8_ERROR", "CE8: Unknown Error", "RESTART_APP"),
    (78, "VGPU_START_ERROR", "vGPU Start Error", "UPDATE_SWFW"),
    (79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus", "RESTART_BM"),
    (80, "PBDMA_PUSHBUFFER_CRC_MISMATCH", "Corrupted data sent to GPU", "RESTART_APP"),
    (81, "ROBUST_CHANNEL_VGA_SUBSYSTEM_ERROR", "Unused", "CONTACT_SUPPORT"),
    (82, "ROBUST_CHANNEL_NVJPG0_ERROR", "NVJPG0 Error", "RESTART_APP"),
    (83, "ROBUST_CHANNEL_NVDEC1_ERROR", "NVDEC1 Error", "RESTART_APP"),
    (84, "ROBUST_CHANNEL_NVDEC2_ERROR", "NVDEC2 Error", "RESTART_APP"),
    (85, "ROBUST_CHANNEL_CE9_ERROR", "CE9: Unknown Error", "RESTART_APP"),
    (86, "ROBUST_CHANNEL_OFA0_ERROR", "OFA Exception", "RESTART_APP"),
    (87, "NVTELEMETRY_DRIVER_REPORT", "Unused", "CONTACT_SUPPORT"),
    (88, "ROBUST_CHANNEL_NVDEC3_ERROR", "NVDEC3 Error", "RESTART_APP"),
    (89, "ROBUST_CHANNEL_NVDEC4_ERROR", "NVDEC4 Error", "RESTART_APP"),
    (90, "LTC_ERROR", "Unused", "CONTACT_SUPPORT"),
    (91, "RESERVED_XID", "Unused", "CONTACT_SUPPORT"),
    (92, "EXCESSIVE_SBE_INTERRUPTS", "High single-bit ECC error rate", "IGNORE"),
    (93, "INFOROM_ERASE_LIMIT_EXCEEDED", "Non-fatal violation of provisioned InfoROM wear limit", "IGNORE"),
    (94, "ROBUST_CHANNEL_CONTAINED_ERROR", "Contained memory error", "RESTART_APP"),
    (95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "Uncontained memory error", "RESET_GPU"),
    (96, "ROBUST_CHANNEL_NVDEC5_ERROR", "NVDEC5 Error", "RESTART_APP"),
    (97, "ROBUST_CHANNEL_NVDEC6_ERROR", "NVDEC6 Error", "RESTART_APP"),
    (98, "ROBUST_CHANNEL_NVDEC7_ERROR", "NVDEC7 Error", "RESTART_APP"),
    (99, "ROBUST_CHANNEL_NVJPG1_ERROR", "NVJPG1 Error", "RESTART_APP"),
    (100, "ROBUST_CHANNEL_NVJPG2_ERROR", "NVJPG2 Error", "RESTART_APP"),
    (101, "ROBUST_CHANNEL_NVJPG3_ERROR", "NVJPG3 Error", "RESTART_APP"),
    (102, "ROBUST_CHANNEL_NVJPG4_ERROR", "NVJPG4 Error", "RESTART_APP"),
    (103, "ROBUST_CHANNEL_NVJPG5_ERROR", "NVJPG5 Error", "RESTART_APP"),
    (104, "ROBUST_CHANNEL_NVJPG6_ERROR", "NVJPG6 Error", "RESTART_APP"),
    (105, "ROBUST_CHANNEL_NVJPG7_ERROR", "NVJPG7 Error", "RESTART_APP"),
    (106, "SMBPBI_TEST_MESSAGE", "SMBPBI Test Message", "IGNORE"),
    (107, "SMBPBI_TEST_MESSAGE_SILENT", "SMBPBI Test Message Silent", "IGNORE"),
    (108, "NVLINK_REMOTE_TRANSLATION_ERROR", "Unused", "IGNORE"),
    (109, "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "Context Switch Timeout Error", "RESET_GPU"),
    (110, "SEC_FAULT_ERROR", "Security Fault Error", "RESET_GPU"),
    (111, "BUNDLE_ERROR_EVENT", "Unused", "CONTACT_SUPPORT"),
    (112, "DISP_SUPERVISOR_ERROR", "Unused", "CONTACT_SUPPORT"),
    (113, "DP_LT_FAILURE", "Unused", "CONTACT_SUPPORT"),
    (114, "HEAD_RG_UNDERFLOW", "Unused", "CONTACT_SUPPORT"),
    (115, "CORE_CHANNEL_REGS", "Unused", "CONTACT_SUPPORT"),
    (116, "WINDOW_CHANNEL_REGS", "Unused", "CONTACT_SUPPORT"),
    (117, "CURSOR_CHANNEL_REGS", "Unused", "CONTACT_SUPPORT"),
    (118, "HEAD_REGS", "Unused", "CONTACT_SUPPORT"),
    (119, "GSP_RPC_TIMEOUT", "GSP RPC Timeout", "RESET_GPU"),
    (120, "GSP_ERROR", "GSP Error", "RESET_GPU"),
    (121, "C2C_ERROR", "C2C Error", "IGNORE"),
    (122, "SPI_PMU_RPC_READ_FAIL", "Unused", "CONTACT_SUPPORT"),
    (123, "SPI_PMU_RPC_WRITE_FAIL", "Unused", "CONTACT_SUPPORT"),
    (124, "SPI_PMU_RPC_ERASE_FAIL", "Unused", "CONTACT_SUPPORT"),
    (125, "INFOROM_FS_ERROR", "Unused", "CONTACT_SUPPORT"),
    (126, "ROBUST_CHANNEL_CE10_ERROR", "CE10: Unknown Error", "RESTART_APP"),
    (127, "ROBUST_CHANNEL_CE11_ERROR", "CE11: Unknown Error", "RESTART_APP"),
    (128, "ROBUST_CHANNEL_CE12_ERROR", "CE12: Unknown Error", "RESTART_APP"),
    (129, "ROBUST_CHANNEL_CE13_ERROR", "CE13: Unknown Error", "RESTART_APP"),
    (130, "ROBUST_CHANNEL_CE14_ERROR", "CE14: Unknown Error", "RESTART_APP"),
    (131, "ROBUST_CHANNEL_CE15_ERROR", "CE15: Unknown Error", "RESTART_APP"),
    (132, "ROBUST_CHANNEL_CE16_ERROR", "CE16: Unknown Error", "RESTART_APP"),
    (133, "ROBUST_CHANNEL_CE17_ERROR", "CE17: Unknown Error", "RESTART_APP"),
    (134, "ROBUST_CHANNEL_CE18_ERROR", "CE18: Unknown Error", "RESTART_APP"),
    (135, "ROBUST_CHANNEL_CE19_ERROR", "CE19: Unknown Error", "RESTART_APP"),
    (136, "ALI_TRAINING_FAIL", "Link Training Failed", "RESET_GPU"),
    (137, "NVLINK_PRIV_ERR", "NVLink Privilege Error", "IGNORE"),
    (138, "ROBUST_CHANNEL_DLA_ERROR", "Unused", "CONTACT_SUPPORT"),
    (139, "ROBUST_CHANNEL_OFA1_ERROR", "OFA1 Error", "RESTART_APP"),
    (140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "ECC Unrecovered Error", "RESET_GPU"),
    (141, "ROBUST_CHANNEL_FAST_PATH_ERROR", "CUDA Fast Path Error", "IGNORE"),
    (142, "ROBUST_CHANNEL_NVENC3_ERROR", "NVENC3 Error", "CONTACT_SUPPORT"),
    (143, "GPU_INIT_ERROR", "GPU Initialization Error", "RESET_GPU"),
    (144, "NVLINK_SAW_ERROR", "NVLINK: SAW Error", "WORKFLOW_NVLINK5_ERR"),
    (145, "NVLINK_RLW_ERROR", "NVLINK: RLW Error", "WORKFLOW_NVLINK5_ERR"),
    (146, "NVLINK_TLW_ERROR", "NVLINK: TLW Error", "WORKFLOW_NVLINK5_ERR"),
    (147, "NVLINK_TREX_ERROR", "NVLINK: TREX Error", "WORKFLOW_NVLINK5_ERR"),
    (148, "NVLINK_NVLPW_CTRL_ERROR", "NVLINK: NVLPW_CTRL Error", "WORKFLOW_NVLINK5_ERR"),
    (149, "NVLINK_NETIR_ERROR", "NVLINK: NETIR Error", "WORKFLOW_NVLINK5_ERR"),
    (150, "NVLINK_MSE_ERROR", "NVLINK: MSE Error", "WORKFLOW_NVLINK5_ERR"),
    (151, "ROBUST_CHANNEL_KEY_ROTATION_ERROR", "Key rotation Error", "RESTART_VM"),
    (152, "ROBUST_CHANNEL_DLA_SMMU_ERROR", "DLA SMMU Error", "IGNORE"),
    (153, "ROBUST_CHANNEL_DLA_TIMEOUT", "DLA timeout Error", "IGNORE"),
    (154, "GPU_RECOVERY_ACTION_CHANGED", "GPU Recovery Action Changed", "XID_154"),
    (155, "NVLINK_SW_DEFINED_ERROR", "NVLINK: SW Defined Error", "RESET_GPU"),
    (156, "RESOURCE_RETIREMENT_EVENT", "Resource Retirement Event", "RESET_GPU"),
    (157, "RESOURCE_RETIREMENT_FAILURE", "Resource Retirement Failure", "IGNORE"),
    (158, "GPU_FATAL_TIMEOUT", "GPU Fatal Timeout", "RESET_GPU"),
    (159, "ROBUST_CHANNEL_CHI_NON_DATA_ERROR", "CHI Non-Data Error", "CHECK_UVM"),
    (160, "CHANNEL_RETIREMENT_EVENT", "Channel Retirement Event", "IGNORE"),
    (161, "CHANNEL_RETIREMENT_FAILURE", "Channel Retirement Failure", "IGNORE"),
    (162, "PSHC_REENGAGED", "Power Smoothing HW Circuitry capability reengaged", ""),
    (163, "PSHC_DISENGAGED", "Power Smoothing HW Circuitry capability disengaged", ""),
    (164, "PSHC_LOW_LIFETIME", "Power Smoothing HW Circuitry low lifetime reached", ""),
    (165, "PSHC_ZERO_LIFETIME", "Power Smoothing HW Circuitry lifetime exhausted", ""),
    (
        166,
        "NVLINK_SECURE_CRYPTO_ERR",
        "CC traffic seen prior to link properly being configured for encrypted traffic",
        "",
    ),
    (167, "PCIE_FATAL_TIMEOUT", "PCIE_FATAL_TIMEOUT", ""),
    (168, "REDUCED_GPU_MEMORY_CAPACITY", "Errors found in WPR (write protected region)", ""),
    (169, "SEC2_HALT_ERROR", "Internal micro-controller halt", ""),
    (170, "NVLINK_SECURE_OTHER", "Interrupt seen in CC mode", ""),
    (
        171,
        "UNCORRECTABLE_DRAM_ERROR",
        "Additional to Xid 48 providing more details on particulars of fault to differentiate DRAM/SRAM",
        "",
    ),
    (
        172,
        "UNCORRECTABLE_SRAM_ERROR",
        "Additional to Xid 48 providing more details on particulars of fault to differentiate DRAM/SRAM",
        "",
    ),
)


def _xid(code: int, mnemonic: str, meaning: str, sheet: str) -> CatalogueEntry:
    resolution, why = XID_POLICY.get(code, (SHEET_RESOLUTIONS[sheet], ""))
    source = f"{XID_SHEET} (immediate resolution {sheet or 'none given'})"
    if why:
        source += f"; fleet-burnin: {why}"
    return CatalogueEntry(code, mnemonic, meaning, sheet, resolution, _SEVERITY[resolution], source)


XID_CATALOGUE: Mapping[int, CatalogueEntry] = {row[0]: _xid(*row) for row in _XID_ROWS}

#: The Fabric Manager guide's classes of SXid, and what each asks of a bare-metal node: a non-fatal SXid
#: nothing; a potentially fatal one (D.5: "restart the guest VM") and an always fatal one (D.6: "restart the
#: host to reset the entire fabric") a restart of the node.
_NON = "non-fatal"
_POTENTIALLY = "potentially fatal"
_ALWAYS = "always fatal"
_SXID_CLASSES: Mapping[str, tuple[XidResolution, XidSeverity]] = {
    _NON: (R.NONE, XidSeverity.INFORMATIONAL),
    _POTENTIALLY: (R.REBOOT, XidSeverity.RECOVERABLE),
    _ALWAYS: (R.REBOOT, XidSeverity.FATAL),
}

_SXID_ROWS: tuple[tuple[int, str, str], ...] = (
    (10001, "Host_priv_error", _POTENTIALLY),
    (10002, "Host_priv_timeout", _POTENTIALLY),
    (10003, "Host_unhandled_interrupt", _ALWAYS),
    (10004, "Host_thermal_event_start", _POTENTIALLY),
    (10005, "Host_thermal_event_end", _POTENTIALLY),
    (11001, "ingress invalid command", _POTENTIALLY),
    (11004, "Ingress invalid ACL", _NON),
    (11009, "ingress invalid VCSet", _POTENTIALLY),
    (11012, "Single bit ECC errors", _NON),
    (11013, "ingress header DBE", _POTENTIALLY),
    (11018, "ingress RID DBE", _POTENTIALLY),
    (11019, "ingress RLAN DBE", _POTENTIALLY),
    (11020, "ingress control parity", _POTENTIALLY),
    (11021, "Single bit ECC errors", _NON),
    (11022, "Single bit ECC errors", _NON),
    (11023, "Single bit ECC errors", _NON),
    (12001, "egress crossbar overflow", _POTENTIALLY),
    (12002, "egress packet route", _POTENTIALLY),
    (12020, "egress sequence ID error", _ALWAYS),
    (12021, "Single bit ECC errors", _NON),
    (12022, "egress input ECC DBE error", _POTENTIALLY),
    (12023, "Single bit ECC errors", _NON),
    (12024, "egress output ECC DBE error", _POTENTIALLY),
    (12025, "egress credit overflow", _POTENTIALLY),
    (12026, "egress destination request ID error", _POTENTIALLY),
    (12027, "egress destination response ID error", _POTENTIALLY),
    (12028, "egress nonposted PRIV error", _NON),
    (12030, "egress control parity error", _POTENTIALLY),
    (12031, "egress credit parity error", _POTENTIALLY),
    (12032, "egress flit type mismatch", _POTENTIALLY),
    (14017, "TS ATO timeout", _POTENTIALLY),
    (15001, "route buffer over/underflow", _POTENTIALLY),
    (15006, "route transdone over/underflow", _POTENTIALLY),
    (15008, "Single bit ECC errors", _NON),
    (15009, "route GLT DBE", _POTENTIALLY),
    (15010, "route parity", _POTENTIALLY),
    (15011, "Single bit ECC errors", _NON),
    (15012, "route incoming DBE", _POTENTIALLY),
    (15013, "route credit parity", _POTENTIALLY),
    (19047, "NCISOC HDR ECC DBE Error", _POTENTIALLY),
    (19048, "NCISOC DAT ECC DBE Error", _POTENTIALLY),
    (19049, "Single bit ECC errors", _NON),
    (19054, "HDR RAM ECC DBE Error", _POTENTIALLY),
    (19055, "Single bit ECC errors", _NON),
    (19056, "DAT0 RAM ECC DBE Error", _POTENTIALLY),
    (19057, "Single bit ECC errors", _NON),
    (19058, "DAT1 RAM ECC DBE Error", _POTENTIALLY),
    (19059, "Single bit ECC errors", _NON),
    (19060, "CREQ RAM HDR ECC DBE Error", _POTENTIALLY),
    (19061, "CREQ RAM DAT ECC DBE Error", _POTENTIALLY),
    (19062, "Single bit ECC errors", _NON),
    (19063, "Response RAM HDR ECC DBE Error", _POTENTIALLY),
    (19064, "Response RAM DAT ECC DBE Error", _POTENTIALLY),
    (19065, "Single bit ECC errors", _NON),
    (19066, "COM RAM HDR ECC DBE Error", _POTENTIALLY),
    (19067, "COM RAM DAT ECC DBE Error", _POTENTIALLY),
    (19068, "Single bit ECC errors", _NON),
    (19069, "RSP1 RAM HDR ECC DBE Error", _POTENTIALLY),
    (19070, "RSP1 RAM DAT ECC DBE Error", _POTENTIALLY),
    (19071, "Single bit ECC errors", _NON),
    (19084, "AN1 Heartbeat Timeout Error", _NON),
    (20001, "TX Replay Error", _NON),
    (20009, "RX Short Error Rate", _NON),
    (20012, "Broken/inconsistent connection", _NON),
    (20034, "LTSSM Fault Up", _POTENTIALLY),
    (22003, "Minion Halt", _ALWAYS),
    (22011, "Minion exterror", _ALWAYS),
    (22013, "Minion Link DLREQ interrupt", _NON),
    (23001, "ingress SRC-VC buffer overflow", _ALWAYS),
    (23002, "ingress SRC-VC buffer underflow", _ALWAYS),
    (23003, "egress DST-VC credit overflow", _ALWAYS),
    (23004, "egress DST-VC credit underflow", _ALWAYS),
    (23005, "ingress packet burst error", _ALWAYS),
    (23006, "ingress packet sticky error", _ALWAYS),
    (23007, "possible bubbles at ingress", _ALWAYS),
    (23008, "ingress packet invalid dst error", _ALWAYS),
    (23009, "ingress packet parity error", _ALWAYS),
    (23010, "ingress SRC-VC buffer overflow", _ALWAYS),
    (23011, "ingress SRC-VC buffer underflow", _ALWAYS),
    (23012, "egress DST-VC credit overflow", _ALWAYS),
    (23013, "egress DST-VC credit underflow", _ALWAYS),
    (23014, "ingress packet burst error", _ALWAYS),
    (23015, "ingress packet sticky error", _ALWAYS),
    (23016, "possible bubbles at ingress", _ALWAYS),
    (23017, "ingress credit parity error", _ALWAYS),
    (24001, "Single bit ECC errors", _NON),
    (24002, "Single bit ECC errors", _NON),
    (24003, "Single bit ECC errors", _NON),
    (24004, "sourcetrack TCEN0 crubmstore DBE", _POTENTIALLY),
    (24005, "sourcetrack TCEN0 TD crubmstore DBE", _POTENTIALLY),
    (24006, "sourcetrack TCEN1 crubmstore DBE", _POTENTIALLY),
    (24007, "sourcetrack timeout error", _POTENTIALLY),
)


def _sxid(code: int, name: str, kind: str) -> CatalogueEntry:
    resolution, severity = _SXID_CLASSES[kind]
    return CatalogueEntry(code, name, name, kind, resolution, severity, f"{SXID_GUIDE} ({kind})")


SXID_CATALOGUE: Mapping[int, CatalogueEntry] = {row[0]: _sxid(*row) for row in _SXID_ROWS}


def catalogue_entry(*, sxid: bool, code: int) -> CatalogueEntry | None:
    """The catalogue's entry for a code (None for a code the catalogue does not list)."""
    return (SXID_CATALOGUE if sxid else XID_CATALOGUE).get(code)
