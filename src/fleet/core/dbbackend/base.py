"""Django's PostgreSQL backend, pointed at the embedded server on first connection."""

from __future__ import annotations

from django.conf import settings
from django.db.backends.base.base import BaseDatabaseWrapper
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


def database_url(connection: BaseDatabaseWrapper) -> str:
    """A DATABASE_URL reaching the database `connection` uses, for a process this one starts (a
    `fleet serve` of the tests or the bench): read from the connection's parameters, not its
    settings, which name no host or port for the embedded server (its socket is found on first
    connection)."""
    params = connection.get_connection_params()
    name = connection.settings_dict["NAME"]
    user = params.get("user") or "postgres"
    host = params.get("host") or "127.0.0.1"
    port = params.get("port") or 5432
    if str(host).startswith("/"):
        return f"postgresql://{user}@/{name}?host={host}&port={port}"
    password = params.get("password")
    auth = f"{user}:{password}" if password else user
    return f"postgresql://{auth}@{host}:{port}/{name}"
