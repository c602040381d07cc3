# syntax=docker/dockerfile:1
# The gateway as one image: `gateway serve` on port 8000, settings from GATEWAY_* variables.
# Built in two stages: uv installs the locked dependencies and the gateway into a virtual
# environment, and only that environment is copied into the runtime image (no uv, no build
# cache, no sources outside the package). Pin the bases by digest in your own registry if you
# need byte-for-byte rebuilds: `docker buildx imagetools inspect python:3.11.11-slim-bookworm`.
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm
ARG UV_IMAGE=ghcr.io/astral-sh/uv:0.13.9

FROM ${UV_IMAGE} AS uv

FROM ${PYTHON_IMAGE} AS build
COPY --from=uv /uv /usr/local/bin/uv
WORKDIR /app
ENV UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/app/.venv
# Dependencies first (cached while only the code changes), exactly as locked (--frozen: the
# build fails rather than resolve anything uv.lock does not say).
COPY pyproject.toml uv.lock README.md ./
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev --no-install-project
COPY gateway ./gateway
# The gateway itself, installed (not editable): the runtime image has no sources to point at.
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev --no-editable

FROM ${PYTHON_IMAGE}
RUN useradd --system --uid 10001 --home /app gateway \
    && mkdir -p /app/data && chown gateway /app/data
COPY --from=build /app/.venv /app/.venv
ENV PATH="/app/.venv/bin:$PATH" PYTHONUNBUFFERED=1
WORKDIR /app
USER gateway
EXPOSE 8000
# Liveness only: whether a process should get traffic is `/ready` (the load balancer's check).
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s \
    CMD ["python", "-c", "import urllib.request as u; u.urlopen('http://127.0.0.1:8000/health')"]
# A container listens beyond loopback, where development mode (any key accepted) never runs:
# every request needs a key. Set GATEWAY_API_KEYS, or create managed keys in the database
# (`docker exec <container> gateway keys create --project app`); until then, every API call
# gets 401. (docs/security.md)
ENV GATEWAY_DEVELOPMENT_MODE=off
# SIGTERM starts the drain (GATEWAY_DRAIN_SECONDS); give the container longer than that to stop.
STOPSIGNAL SIGTERM
CMD ["gateway", "serve", "--host", "0.0.0.0", "--port", "8000"]
