"""A device's certificate as a printable page (`/sites/<slug>/devices/<hostname>/certificate/`):
the valid one, or one of its history by serial."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fleet.burnin.certificates.reads import device_certificates_summary
from fleet.burnin.models import AcceptanceCertificate, TestExecution
from fleet.core.exceptions import NotFoundError
from fleet.inventory.models import Device, Site
from fleet.inventory.selectors import site_by_slug
from fleet_rules.evidence import measured
from fleet_rules.gpu_vendors import gpus_in_words
from fleet_rules.readable import metric_unit, quantity, rule_text


@dataclass(frozen=True)
class JudgedRule:
    """One threshold of the certificate beside the value its deciding execution measured."""

    rule: str  # `busbw_gbps ≥ 350 GB/s`
    measured: str  # `380.5 GB/s`, or `missing`


def judged_rules(document: dict[str, Any]) -> dict[str, list[JudgedRule]]:
    """Requirement name → its thresholds as signed, each with the value its deciding execution
    measured (one query: the executions the certificate names)."""
    requirements = document.get("requirements") or []
    ids = [r.get("execution", {}).get("id") for r in requirements if isinstance(r, dict)]
    found = TestExecution.objects.filter(id__in=[i for i in ids if i]).values_list(
        "id", "metrics", "requirement__metric_units"
    )
    metrics = {str(k): (m, declared or {}) for k, m, declared in found}
    judged: dict[str, list[JudgedRule]] = {}
    for r in requirements:
        execution_id = (r.get("execution") or {}).get("id")
        values, declared = metrics.get(str(execution_id), ({}, {}))
        lines = []
        for t in r.get("thresholds") or []:
            name = f"{t['metric']}.{t['statistic']}" if t.get("statistic") else t["metric"]
            unit = metric_unit(values, t["metric"], declared.get(t["metric"], ""))
            lines.append(
                JudgedRule(
                    rule_text(name, t.get("comparator"), t.get("threshold"), unit),
                    quantity(measured(values, t["metric"], t.get("statistic")), unit),
                )
            )
        judged[r.get("name", "")] = lines
    return judged


@dataclass(frozen=True)
class CertificatePageRead:
    site: Site
    device: Device
    certificate: AcceptanceCertificate
    valid: bool  # the certificate is the device's valid one
    judged: dict[str, list[JudgedRule]]  # requirement → its thresholds beside the measured values
    gpus: str = ""  # the GPUs of the fingerprint it binds, in words (`8 × AMD Instinct MI300X`): whose they are


def certificate_page(slug: str, hostname: str, *, serial: str | None) -> CertificatePageRead:
    """The device's valid certificate, or the one of its history with this serial, with the values
    its evidence measured (four queries); `NotFoundError` for an unknown site or device, or no such
    certificate."""
    site = site_by_slug(slug)
    try:
        device = Device.objects.get(site=site, hostname=hostname)
    except Device.DoesNotExist:
        raise NotFoundError(f"No device {hostname!r} at site {site.slug}.") from None
    summary = device_certificates_summary(device.id)
    certificate = next((c for c in summary.history if str(c.serial) == serial), None) if serial else summary.valid
    if certificate is None:
        raise NotFoundError(f"No {'such' if serial else 'valid'} certificate of {hostname}.")
    bound = certificate.document.get("fingerprint") or {}
    return CertificatePageRead(
        site,
        device,
        certificate,
        certificate == summary.valid,
        judged_rules(certificate.document),
        gpus_in_words(bound.get("inventory")),
    )
