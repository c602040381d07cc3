"""The operator API (`/v1/admin/...`) and its console (`GET /admin`), one module per resource:
who may call it (`access`), the listings of threads and runs (`listings`), usage (`usage`),
the project's keys (`keys`), the threads waiting for a human (`waiting`), the models and their
prices (`models`), schedules and webhook deliveries (`automation`), and the page itself
(`console`)."""

from . import automation, console, keys, listings, models, usage, waiting

routes = [*console.routes, *listings.routes, *usage.routes, *keys.routes, *waiting.routes,
          *models.routes, *automation.routes]
