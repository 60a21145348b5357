"""Who a person is at the company's identity provider: the (issuer, subject) an OpenID Connect
sign-in names, bound to one user. A person is found by it, never by a name a provider sends (a
provider's `preferred_username` equal to a local break-glass admin's name takes nothing over)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class OidcIdentity(models.Model):
    """One provider's subject, bound to a user (created at the subject's first sign-in)."""

    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_identity")
    created_at = models.DateTimeField(auto_now_add=True)
    last_login_at = models.DateTimeField(null=True)

    class Meta:
        ordering = ["issuer", "subject"]
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="access_oidc_identity_once")]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"
