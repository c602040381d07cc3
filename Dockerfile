# The gateway as one image: `gateway serve` on port 8000, settings from GATEWAY_* variables.
FROM python:3.11-slim-bookworm
COPY --from=ghcr.io/astral-sh/uv:0.5 /uv /usr/local/bin/uv
WORKDIR /app
ENV UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy PATH="/app/.venv/bin:$PATH"
# Dependencies first (cached while only the code changes), exactly as locked.
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --frozen --no-dev --no-install-project
COPY gateway ./gateway
COPY openapi ./openapi
COPY schemas ./schemas
RUN uv sync --frozen --no-dev
RUN useradd --system --home /app gateway && mkdir -p /app/data && chown gateway /app/data
USER gateway
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s CMD python -c "import urllib.request as u; u.urlopen('http://127.0.0.1:8000/health')"
# Without GATEWAY_API_KEYS the gateway is in development mode and refuses a non-loopback address:
# set keys (or, on a trusted network only, add "--allow-remote").
CMD ["gateway", "serve", "--host", "0.0.0.0", "--port", "8000"]
