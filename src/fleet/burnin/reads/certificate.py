"""A device's certificate as a printable page (`/sites/<slug>/devices/<hostname>/certificate/`):
the valid one, or one of its history by serial."""

from __future__ import annotations

from dataclasses import dataclass

from fleet.burnin.certificates.reads import device_certificates_summary
from fleet.burnin.models import AcceptanceCertificate
from fleet.core.exceptions import NotFoundError
from fleet.inventory.models import Device, Site
from fleet.inventory.selectors import site_by_slug


@dataclass(frozen=True)
class CertificatePageRead:
    site: Site
    device: Device
    certificate: AcceptanceCertificate
    valid: bool  # the certificate is the device's valid one


def certificate_page(slug: str, hostname: str, *, serial: str | None) -> CertificatePageRead:
    """The device's valid certificate, or the one of its history with this serial (three
    queries); `NotFoundError` for an unknown site or device, or no such certificate."""
    site = site_by_slug(slug)
    try:
        device = Device.objects.get(site=site, hostname=hostname)
    except Device.DoesNotExist:
        raise NotFoundError(f"No device {hostname!r} at site {site.slug}.") from None
    summary = device_certificates_summary(device.id)
    certificate = next((c for c in summary.history if str(c.serial) == serial), None) if serial else summary.valid
    if certificate is None:
        raise NotFoundError(f"No {'such' if serial else 'valid'} certificate of {hostname}.")
    return CertificatePageRead(site, device, certificate, certificate == summary.valid)
