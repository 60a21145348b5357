"""A strict Content-Security-Policy on every response (docs/operations.md, "Content Security
Policy").

The pages are server-rendered with no inline script, no inline style and no `javascript:` URL,
so the policy allows only this origin's own files: a script injected into a page (a hostname, an
error text or a metric name that escaped escaping) does not run, the pages cannot be framed, forms
post only here and `<base>` cannot move relative URLs elsewhere. Django 5.2 has no CSP support of
its own; this middleware sets the header unless a view set one. A path prefix in
`CONTENT_SECURITY_POLICY_PATHS` may widen one directive for its pages (the Swagger UI's
stylesheet draws its icons as `data:` images).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from django.conf import settings
from django.http import HttpRequest, HttpResponse

HEADER = "Content-Security-Policy"

#: The policy: directive → its sources. Every directive is explained in docs/operations.md.
DEFAULT_POLICY: dict[str, str] = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self'",
    "object-src": "'none'",
    "frame-ancestors": "'none'",
    "form-action": "'self'",
    "base-uri": "'none'",
}


def policy_text(policy: Mapping[str, str]) -> str:
    return "; ".join(f"{directive} {sources}" for directive, sources in policy.items())


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        base = dict(getattr(settings, "CONTENT_SECURITY_POLICY", DEFAULT_POLICY))
        self.default = policy_text(base)
        self.by_prefix = [
            (prefix, policy_text(base | dict(widened)))
            for prefix, widened in getattr(settings, "CONTENT_SECURITY_POLICY_PATHS", {}).items()
        ]

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if HEADER not in response:
            response[HEADER] = next(
                (text for prefix, text in self.by_prefix if request.path.startswith(prefix)), self.default
            )
        return response
