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
# A container listens beyond loopback, where development mode (any key accepted) never runs:
# every request needs a key. Set GATEWAY_API_KEYS, or create managed keys in the database
# (`docker exec <container> gateway keys create --project app`); until then, every API call
# gets 401. (docs/security.md)
ENV GATEWAY_DEVELOPMENT_MODE=off
CMD ["gateway", "serve", "--host", "0.0.0.0", "--port", "8000"]
