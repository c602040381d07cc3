"""The operator API (`/v1/admin/...`) and its console (`GET /admin`), one module per resource:
who may call it (`access`), the listings of threads and runs (`listings`), usage (`usage`),
the project's keys (`keys`), the threads waiting for a human (`waiting`), the models and their
prices (`models`), and the page itself (`console`).

Crons and webhook deliveries join here as their own modules (and tabs of the console) once
the gateway has them."""

from . import console, keys, listings, models, usage, waiting

routes = [*console.routes, *listings.routes, *usage.routes, *keys.routes, *waiting.routes,
          *models.routes]
