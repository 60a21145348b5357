"""ASGI entry point (what `fleet serve` runs): Django's ASGI handler behind the request bounds
(`fleet.core.bounds.BoundedASGIApplication`: the body is read whole, bounded in size and time,
before any thread or Django code is involved)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fleet.settings")
django_application = get_asgi_application()

from fleet.core.bounds import BoundedASGIApplication  # noqa: E402  (after Django is set up)
from fleet.core.heap import freeze_loaded  # noqa: E402
from fleet.core.schema import operation_ids_load  # noqa: E402

operation_ids_load()  # the metrics' and logs' operation labels, before the first request waits for them
application = BoundedASGIApplication(django_application)
freeze_loaded()  # what the worker loaded, out of every full collection's walk (fleet.core.heap)
