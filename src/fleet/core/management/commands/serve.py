"""`fleet serve`: the production server (gunicorn) for the service."""

from __future__ import annotations

import os

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import connections

from fleet.core import embedded
from fleet.core.dbbackend.base import APP_DATABASE


def _embedded_in_use() -> bool:
    return settings.DATABASES["default"]["ENGINE"] == "fleet.core.dbbackend"


class Command(BaseCommand):
    help = "Run the API and admin with gunicorn (not runserver)."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("FLEET_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("FLEET_PORT", "8000")))
        parser.add_argument("--workers", type=int, default=int(os.environ.get("FLEET_WORKERS", "2")))
        parser.add_argument("--threads", type=int, default=int(os.environ.get("FLEET_THREADS", "4")))
        parser.add_argument("--timeout", type=int, default=60, help="Worker timeout in seconds.")
        parser.add_argument("--access-log", action="store_true", help="Log every request to stdout.")

    def handle(self, *args, **options):
        from gunicorn.app.base import BaseApplication

        if _embedded_in_use():
            # The master owns the embedded server, so it lives as long as the service does and
            # forked workers inherit the attachment instead of racing to start it.
            embedded.ensure_server(settings.EMBEDDED_POSTGRES_DIR, database=APP_DATABASE)
        connections.close_all()

        config = {
            "bind": f"{options['host']}:{options['port']}",
            "workers": options["workers"],
            "threads": options["threads"],
            "worker_class": "gthread",
            "timeout": options["timeout"],
            "graceful_timeout": 20,
            "accesslog": "-" if options["access_log"] else None,
            "errorlog": "-",
            "loglevel": "info",
            "proc_name": "fleet",
        }

        class FleetApplication(BaseApplication):
            def load_config(self):
                for key, value in config.items():
                    if value is not None:
                        self.cfg.set(key, value)

            def load(self):
                from fleet.wsgi import application

                return application

        self.stdout.write(f"Serving fleet-burnin on http://{config['bind']}/ (API docs at /api/docs/)")
        FleetApplication().run()
