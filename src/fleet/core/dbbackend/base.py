"""Django's PostgreSQL backend, pointed at the embedded server on first connection."""

from __future__ import annotations

from django.conf import settings
from django.db.backends.postgresql import base

from fleet.core import embedded

#: The database the service uses on the embedded server; test databases are made by Django.
APP_DATABASE = "fleet"


class DatabaseWrapper(base.DatabaseWrapper):
    def get_connection_params(self):
        name = self.settings_dict.get("NAME")
        server = embedded.ensure_server(settings.EMBEDDED_POSTGRES_DIR, database=name if name == APP_DATABASE else None)
        params = super().get_connection_params()
        params["host"] = server.socket_dir
        params["port"] = server.port
        return params
