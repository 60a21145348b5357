"""The fleet file: parsing and whole-file validation into plain declarations.

Every problem is collected with its location (`sites[0].devices[3].resource_class: ...`) so an
operator fixes a file in one pass; nothing is written unless the file is clean.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

import yaml

from fleet.core.yamlfiles import YamlRefused, load_yaml
from fleet.fleetfile.durations import duration_parse
from fleet.fleetfile.reader import MISSING, Reader, is_number, type_name
from fleet.fleetfile.units import read_metric_units
from fleet.inventory.hostnames import hostname_problem
from fleet.inventory.models import SLUG_PATTERN
from fleet.policies.models import GATE_PATTERN, MAX_CONSECUTIVE_PASSES
from fleet_rules.autopilot import Settings as AutopilotSettings
from fleet_rules.gpu_vendors import DEFAULT_GPU_VENDOR, vendor_of_metric, vendor_of_test, wrong_vendor
from fleet_rules.lifecycle import BREAKER_SHARE, BREAKER_WINDOW, REPAIR_AFTER_FAILURES
from fleet_rules.vocabulary import (
    RACK_ACCEPTANCE,
    Comparator,
    ConstraintOperator,
    DeviceState,
    EventType,
    GpuVendor,
    RequirementScope,
    TopologyUnit,
)

CONSTRAINT_OPERATORS = tuple(ConstraintOperator.values)
ORDERING_OPERATORS = (ConstraintOperator.GT, ConstraintOperator.GTE, ConstraintOperator.LT, ConstraintOperator.LTE)


@dataclass(frozen=True)
class ThresholdDecl:
    metric: str
    statistic: str | None
    comparator: str
    threshold: float | int | str
    site: str | None = None


@dataclass
class RequirementDecl:
    name: str
    gate: str
    scope: str
    unit: str | None
    test: str
    rerunnable: bool
    parameter_constraints: dict[str, Any]
    retired: bool
    thresholds: list[ThresholdDecl]
    consecutive_passes: int = 1
    outlier_k: float | None = None
    #: How long a pass counts (`30d`, `12h`, `90m`, `3600s`); None: forever.
    evidence_valid_for: timedelta | None = None
    #: metric → its unit (`metrics: {busbw_gbps: {unit: GB/s}}`): how pages show values; judges nothing.
    metric_units: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LifecycleDecl:
    """What the verdict does to devices of the class (`fleet_rules.lifecycle`); the defaults when the
    file says nothing."""

    auto_accept: bool = True
    repair_after_failures: int = REPAIR_AFTER_FAILURES
    breaker_share: float = BREAKER_SHARE
    breaker_window: timedelta = BREAKER_WINDOW


@dataclass
class PolicyDecl:
    resource_class: str
    description: str
    requirements: list[RequirementDecl]
    lifecycle: LifecycleDecl = LifecycleDecl()
    #: Who made the class's GPUs: its requirements may name only that vendor's tests and health metrics.
    gpu_vendor: GpuVendor = DEFAULT_GPU_VENDOR


@dataclass
class ProfileDecl:
    resource_class: str
    test: str
    name: str
    parameters: dict[str, Any]


@dataclass
class SatelliteDecl:
    name: str


@dataclass
class TopologyDecl:
    unit: str
    label: str
    satellite: str


@dataclass
class DeviceDecl:
    hostname: str
    serial: str
    resource_class: str
    satellite: str
    state: str
    enrolled: bool
    topologies: dict[str, str]


@dataclass(frozen=True)
class AutopilotDecl:
    """A site's bring-up autopilot (`fleet_rules.autopilot.Settings`, docs/autopilot.md); the
    defaults when the file says nothing, with the autopilot off."""

    enabled: bool = AutopilotSettings.enabled
    max_under_test: int = AutopilotSettings.max_under_test
    rack_share: float = AutopilotSettings.rack_share
    backoff: timedelta = AutopilotSettings.backoff
    isolate: bool = AutopilotSettings.isolate
    renew_before: timedelta = AutopilotSettings.renew_before
    #: resource class → its own limit of devices under test at once.
    class_limits: dict[str, int] = field(default_factory=dict)


@dataclass
class SiteDecl:
    slug: str
    name: str
    satellites: list[SatelliteDecl]
    topologies: list[TopologyDecl]
    devices: list[DeviceDecl]
    autopilot: AutopilotDecl = field(default_factory=AutopilotDecl)


@dataclass
class SubscriptionDecl:
    """A webhook subscription (docs/events.md). Its signing secret is never in the file: `secret_env`
    names the environment variable holding it (`whsec_…`); without one a new subscription's
    secret is minted and shown once in the apply's notes."""

    name: str
    url: str
    event_types: list[str]
    site: str | None
    allow_private: bool
    secret_env: str | None


@dataclass
class FleetDocument:
    sites: list[SiteDecl] = field(default_factory=list)
    policies: list[PolicyDecl] = field(default_factory=list)
    parameter_profiles: list[ProfileDecl] = field(default_factory=list)
    subscriptions: list[SubscriptionDecl] = field(default_factory=list)


class FleetFileError(Exception):
    """The file is not valid; `problems` lists every (location, message)."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__(f"{len(problems)} problem(s) in the fleet file")

    def __str__(self) -> str:
        return "\n".join(f"{where}: {message}" if where else message for where, message in self.problems)


def parse_text(text: str) -> FleetDocument:
    """Parse and validate a fleet file; raise FleetFileError listing every problem."""
    try:
        raw = load_yaml(text)
    except YamlRefused as exc:
        raise FleetFileError([("", exc.message)]) from exc  # the message names the line
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise FleetFileError([(where, f"not valid YAML: {getattr(exc, 'problem', exc)}")]) from exc
    if raw is None:
        raw = {}
    reader = Reader()
    document = _read_document(reader, raw)
    if reader.problems:
        raise FleetFileError(reader.problems)
    return document


def _read_document(r: Reader, raw: Any) -> FleetDocument:
    top = r.mapping(raw, "", {"sites", "policies", "parameter_profiles", "subscriptions"})
    if top is None:
        return FleetDocument()
    sites = _present([(w, _read_site(r, w, item)) for w, item in r.items(top, "sites", "")])
    policies = _present([(w, _read_policy(r, w, item)) for w, item in r.items(top, "policies", "")])
    profiles = _present([(w, _read_profile(r, w, item)) for w, item in r.items(top, "parameter_profiles", "")])
    subscriptions = _present([(w, _read_subscription(r, w, item)) for w, item in r.items(top, "subscriptions", "")])
    _check_unique(r, [(w, s.name) for w, s in subscriptions], "name", "subscription")
    _check_unique(r, [(w, s.slug) for w, s in sites], "slug", "site")
    _check_unique(r, [(w, p.resource_class) for w, p in policies], "resource_class", "policy for resource class")
    _check_unique(
        r,
        [(w, (p.resource_class, p.test, p.name)) for w, p in profiles],
        "name",
        "parameter profile (resource_class, test, name)",
    )
    vendors = {p.resource_class: p.gpu_vendor for w, p in policies if not r.has_problem_at(f"{w}.gpu_vendor")}
    for w, profile in profiles:
        vendor = vendors.get(profile.resource_class)
        why = wrong_vendor("test", profile.test, vendor_of_test(profile.test), vendor) if vendor else None
        if why is not None:
            r.problem(f"{w}.test", why)
    return FleetDocument(
        sites=[s for _, s in sites],
        policies=[p for _, p in policies],
        parameter_profiles=[p for _, p in profiles],
        subscriptions=[s for _, s in subscriptions],
    )


def _check_unique(r: Reader, keyed: list[tuple[str, Any]], field_name: str, what: str) -> None:
    seen: dict[Any, str] = {}
    for where, key in keyed:
        if not key:  # missing or blank: already a problem of its own
            continue
        if key in seen:
            r.problem(f"{where}.{field_name}", f"duplicate {what} {key!r} (first at {seen[key]})")
        else:
            seen[key] = where


T = TypeVar("T")


def _present(pairs: list[tuple[str, T | None]]) -> list[tuple[str, T]]:
    return [(where, decl) for where, decl in pairs if decl is not None]


def _read_site(r: Reader, where: str, raw: Any) -> SiteDecl | None:
    m = r.mapping(raw, where, {"slug", "name", "satellites", "topologies", "devices", "autopilot"})
    if m is None:
        return None
    slug = r.string(m, "slug", where, pattern=SLUG_PATTERN, max_length=100)
    satellites = []
    for w, item in r.items(m, "satellites", where):
        sm = r.mapping(item, w, {"name"})
        if sm is not None:
            satellites.append((w, SatelliteDecl(name=r.string(sm, "name", w, max_length=100))))
    _check_unique(r, [(w, s.name) for w, s in satellites], "name", "satellite")
    satellite_names = [s.name for _, s in satellites if s.name]
    default_satellite = satellite_names[0] if len(satellite_names) == 1 else None

    def satellite_ref(mapping: dict[str, Any], w: str) -> str:
        name = r.string(mapping, "satellite", w, required=False, max_length=100)
        if name is None:
            if default_satellite is None:
                r.problem(f"{w}.satellite", "is required when the site does not have exactly one satellite")
                return ""
            return default_satellite
        if name not in satellite_names:
            r.problem(f"{w}.satellite", f"{name!r} is not a satellite of this site")
        return name

    topologies = []
    for w, item in r.items(m, "topologies", where):
        tm = r.mapping(item, w, {"unit", "label", "satellite"})
        if tm is None:
            continue
        topologies.append(
            (
                w,
                TopologyDecl(
                    unit=r.string(tm, "unit", w, choices=TopologyUnit.values),
                    label=r.string(tm, "label", w, max_length=100),
                    satellite=satellite_ref(tm, w),
                ),
            )
        )
    _check_unique(r, [(w, (t.unit, t.label)) for w, t in topologies], "label", "topology")
    labels_by_unit: dict[str, set[str]] = {}
    for _, t in topologies:
        labels_by_unit.setdefault(t.unit, set()).add(t.label)

    devices = []
    for w, item in r.items(m, "devices", where):
        dm = r.mapping(
            item, w, {"hostname", "serial", "resource_class", "satellite", "state", "enrolled", "topologies"}
        )
        if dm is None:
            continue
        memberships = r.object(dm, "topologies", w)
        for unit, label in memberships.items():
            at = f"{w}.topologies.{unit}"
            if unit not in TopologyUnit.values:
                r.problem(at, f"{unit!r} is not a topology unit ({', '.join(TopologyUnit.values)})")
            elif not isinstance(label, str):
                r.problem(at, f"must be a topology label, got {type_name(label)}")
            elif label not in labels_by_unit.get(unit, set()):
                r.problem(at, f"no {unit} topology labelled {label!r} in this site")
        devices.append(
            (
                w,
                DeviceDecl(
                    hostname=_hostname(r, dm, w),
                    serial=r.string(dm, "serial", w, required=False, default="", max_length=128) or "",
                    resource_class=r.string(dm, "resource_class", w, max_length=255),
                    satellite=satellite_ref(dm, w),
                    state=r.string(
                        dm, "state", w, required=False, default=DeviceState.STAGED, choices=DeviceState.values
                    ),
                    enrolled=r.boolean(dm, "enrolled", w, default=False),
                    topologies={str(k): v for k, v in memberships.items()},
                ),
            )
        )
    _check_unique(r, [(w, d.hostname) for w, d in devices], "hostname", "hostname")
    return SiteDecl(
        slug=slug,
        name=r.string(m, "name", where, required=False, default=slug, max_length=200) or slug or "",
        satellites=[s for _, s in satellites],
        topologies=[t for _, t in topologies],
        devices=[d for _, d in devices],
        autopilot=_read_autopilot(r, f"{where}.autopilot", m.get("autopilot")),
    )


def _read_autopilot(r: Reader, where: str, raw: Any) -> AutopilotDecl:
    if raw is None:
        return AutopilotDecl()
    m = r.mapping(
        raw, where, {"enabled", "max_under_test", "rack_share", "backoff", "isolate", "renew_before", "class_limits"}
    )
    if m is None:
        return AutopilotDecl()
    default = AutopilotDecl()
    share = r.positive_number(m, "rack_share", where)
    if share is not None and share > 1:
        r.problem(f"{where}.rack_share", f"must be a share of a rack's devices, above 0 and at most 1, got {share}")
    limits: dict[str, int] = {}
    for resource_class, limit in r.object(m, "class_limits", where).items():
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            r.problem(f"{where}.class_limits.{resource_class}", f"must be a whole number of devices ≥ 1, got {limit!r}")
        else:
            limits[str(resource_class)] = limit
    backoff = _read_duration(r, m, "backoff", where)
    renew_before = _read_duration(r, m, "renew_before", where)
    return AutopilotDecl(
        enabled=r.boolean(m, "enabled", where, default=default.enabled),
        max_under_test=r.integer(m, "max_under_test", where, default=default.max_under_test, low=1, high=1_000_000),
        rack_share=share if share is not None and share <= 1 else default.rack_share,
        backoff=backoff if backoff is not None else default.backoff,
        isolate=r.boolean(m, "isolate", where, default=default.isolate),
        renew_before=renew_before if renew_before is not None else default.renew_before,
        class_limits=limits,
    )


def _hostname(r: Reader, m: dict[str, Any], where: str) -> str:
    """A device's hostname, DNS-style (fleet.inventory.hostnames): it names files and URLs."""
    value = r.string(m, "hostname", where)
    problem = hostname_problem(value) if value else None
    if problem is not None:
        r.problem(f"{where}.hostname", problem)
    return value


def _read_policy(r: Reader, where: str, raw: Any) -> PolicyDecl | None:
    m = r.mapping(raw, where, {"resource_class", "description", "gpu_vendor", "requirements", "lifecycle"})
    if m is None:
        return None
    requirements = _present(
        [(w, _read_requirement(r, w, item)) for w, item in r.items(m, "requirements", where, required=True)]
    )
    _check_unique(r, [(w, q.name) for w, q in requirements], "name", "requirement")
    vendor = r.string(m, "gpu_vendor", where, required=False, default=DEFAULT_GPU_VENDOR, choices=GpuVendor.values)
    known = vendor in GpuVendor.values  # else already a problem: no vendor to check the tests against
    gpu_vendor = GpuVendor(vendor) if known else DEFAULT_GPU_VENDOR
    for at, requirement in requirements if known else ():
        _check_vendor(r, at, requirement, gpu_vendor)
    return PolicyDecl(
        resource_class=r.string(m, "resource_class", where, max_length=255),
        description=r.string(m, "description", where, required=False, default="") or "",
        requirements=[q for _, q in requirements],
        lifecycle=_read_lifecycle(r, f"{where}.lifecycle", m.get("lifecycle")),
        gpu_vendor=gpu_vendor,
    )


def _check_vendor(r: Reader, where: str, requirement: RequirementDecl, vendor: GpuVendor) -> None:
    """A requirement of a class names only its vendor's tests and health metrics (`fleet_rules.gpu_vendors`):
    another vendor's tool is not on the node, and another vendor's metric is never measured."""
    why = wrong_vendor("test", requirement.test, vendor_of_test(requirement.test), vendor)
    if why is not None:
        r.problem(f"{where}.test", why)
    for index, threshold in enumerate(requirement.thresholds):
        why = wrong_vendor("metric", threshold.metric, vendor_of_metric(threshold.metric), vendor)
        if why is not None:
            r.problem(f"{where}.thresholds[{index}].metric", why)


def _read_lifecycle(r: Reader, where: str, raw: Any) -> LifecycleDecl:
    if raw is None:
        return LifecycleDecl()
    m = r.mapping(raw, where, {"auto_accept", "repair_after_failures", "breaker_share", "breaker_window"})
    if m is None:
        return LifecycleDecl()
    share = r.positive_number(m, "breaker_share", where)
    if share is not None and share > 1:
        r.problem(
            f"{where}.breaker_share", f"must be a share of the class's devices, above 0 and at most 1, got {share}"
        )
    window = _read_duration(r, m, "breaker_window", where)
    return LifecycleDecl(
        auto_accept=r.boolean(m, "auto_accept", where, default=True),
        repair_after_failures=r.integer(
            m, "repair_after_failures", where, default=REPAIR_AFTER_FAILURES, low=0, high=100
        ),
        breaker_share=share if share is not None else BREAKER_SHARE,
        breaker_window=window if window is not None else BREAKER_WINDOW,
    )


def _read_requirement(r: Reader, where: str, raw: Any) -> RequirementDecl | None:
    m = r.mapping(
        raw,
        where,
        {
            "name",
            "gate",
            "scope",
            "unit",
            "test",
            "rerunnable",
            "parameter_constraints",
            "retired",
            "thresholds",
            "consecutive_passes",
            "outlier_k",
            "evidence_valid_for",
            "metrics",
        },
    )
    if m is None:
        return None
    name = r.string(m, "name", where, max_length=100)
    gate = r.string(m, "gate", where, pattern=GATE_PATTERN, max_length=64)
    scope = r.string(
        m, "scope", where, required=False, default=RequirementScope.SINGLE_NODE, choices=RequirementScope.values
    )
    unit = r.string(m, "unit", where, required=False, choices=TopologyUnit.values)
    if scope == RequirementScope.MULTI_NODE:
        if unit is None:
            r.problem(f"{where}.unit", "is required for a multi_node requirement")
        if gate and gate != RACK_ACCEPTANCE:
            r.problem(f"{where}.gate", f"multi_node requirements belong to gate {RACK_ACCEPTANCE!r}")
    elif scope == RequirementScope.SINGLE_NODE:
        if unit is not None:
            r.problem(f"{where}.unit", "only multi_node requirements name a topology unit")
        if gate == RACK_ACCEPTANCE:
            r.problem(f"{where}.gate", f"gate {RACK_ACCEPTANCE!r} is for multi_node requirements")
    constraints = r.object(m, "parameter_constraints", where)
    for parameter, condition in constraints.items():
        at = f"{where}.parameter_constraints.{parameter}"
        if not isinstance(condition, dict) or not condition:
            r.problem(at, f"must map operators ({', '.join(CONSTRAINT_OPERATORS)}) to values")
            continue
        for operator, value in condition.items():
            if operator not in CONSTRAINT_OPERATORS:
                r.problem(f"{at}.{operator}", f"unknown operator (use {', '.join(CONSTRAINT_OPERATORS)})")
            elif operator in ORDERING_OPERATORS and not is_number(value):
                r.problem(f"{at}.{operator}", "must be a number")
            elif operator == ConstraintOperator.IN and not isinstance(value, list):
                r.problem(f"{at}.{operator}", "must be a list")
    thresholds = _present(
        [(w, _read_threshold(r, w, item)) for w, item in r.items(m, "thresholds", where, required=True)]
    )
    if not thresholds and isinstance(m.get("thresholds"), list):
        r.problem(f"{where}.thresholds", "a requirement needs at least one threshold to judge anything")
    _check_unique(
        r,
        [(w, (t.metric, t.statistic, t.site)) for w, t in thresholds],
        "metric",
        "rule for this metric, statistic and site",
    )
    return RequirementDecl(
        name=name,
        gate=gate,
        scope=scope,
        unit=unit,
        test=r.string(m, "test", where, max_length=100),
        rerunnable=r.boolean(m, "rerunnable", where, default=True),
        parameter_constraints=constraints,
        retired=r.boolean(m, "retired", where, default=False),
        thresholds=[t for _, t in thresholds],
        consecutive_passes=r.integer(m, "consecutive_passes", where, default=1, low=1, high=MAX_CONSECUTIVE_PASSES),
        outlier_k=r.positive_number(m, "outlier_k", where),
        evidence_valid_for=_read_duration(r, m, "evidence_valid_for", where),
        metric_units=read_metric_units(r, m, where),
    )


def _read_duration(r: Reader, m: dict[str, Any], key: str, where: str) -> timedelta | None:
    value = m.get(key)
    if value is None:
        return None
    duration = duration_parse(value)
    if duration is None:
        r.problem(f"{where}.{key}", f"must be a duration such as 30d, 12h, 90m or 3600s, got {value!r}")
    return duration


def _read_threshold(r: Reader, where: str, raw: Any) -> ThresholdDecl | None:
    m = r.mapping(raw, where, {"metric", "statistic", "comparator", "threshold", "site"})
    if m is None:
        return None
    comparator = r.string(m, "comparator", where, choices=Comparator.values)
    threshold = m.get("threshold", MISSING)
    if threshold is MISSING or threshold is None:
        r.problem(f"{where}.threshold", "is required")
        threshold = 0
    elif isinstance(threshold, str):
        if comparator and comparator != Comparator.EQ:
            r.problem(f"{where}.threshold", "a string threshold can only be compared with eq")
    elif not is_number(threshold):
        r.problem(f"{where}.threshold", f"must be a finite number or a string, got {type_name(threshold)}")
    return ThresholdDecl(
        metric=r.string(m, "metric", where, max_length=100),
        statistic=r.string(m, "statistic", where, required=False, max_length=32, non_blank=True),
        comparator=comparator,
        threshold=threshold,
        site=r.string(m, "site", where, required=False, pattern=SLUG_PATTERN),
    )


def _read_profile(r: Reader, where: str, raw: Any) -> ProfileDecl | None:
    m = r.mapping(raw, where, {"resource_class", "test", "name", "parameters"})
    if m is None:
        return None
    return ProfileDecl(
        resource_class=r.string(m, "resource_class", where, max_length=255),
        test=r.string(m, "test", where, max_length=100),
        name=r.string(m, "name", where, required=False, default="default", max_length=100) or "default",
        parameters=r.object(m, "parameters", where),
    )


ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"


def _read_subscription(r: Reader, where: str, raw: Any) -> SubscriptionDecl | None:
    m = r.mapping(raw, where, {"name", "url", "event_types", "site", "allow_private", "secret_env"})
    if m is None:
        return None
    types: list[str] = []
    for at, item in r.items(m, "event_types", where):
        if item not in EventType.values:
            r.problem(at, f"{item!r} is not one of: {', '.join(EventType.values)}")
        else:
            types.append(item)
    return SubscriptionDecl(
        name=r.string(m, "name", where, pattern=SLUG_PATTERN, max_length=100),
        url=r.string(m, "url", where, pattern=r"^https?://", max_length=2000),
        event_types=types,
        site=r.string(m, "site", where, required=False, pattern=SLUG_PATTERN, max_length=100),
        allow_private=r.boolean(m, "allow_private", where, default=False),
        secret_env=r.string(
            m, "secret_env", where, required=False, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=200
        ),
    )
