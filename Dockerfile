# tiergate gateway image: slim, non-root, healthy when /readyz says so.
#   docker build -t tiergate .
#   docker run -p 4000:4000 -e TIERGATE_TOKEN=... -e OPENAI_API_KEY=... tiergate
# docker-compose.yml adds Redis and PostgreSQL; docs/deploy.md explains both.

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
# every dependency as a wheel, so the final stage needs no compiler or pip cache
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /var/lib/tiergate tiergate
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER 10001:10001
# the default SQLite usage database and the usage spool live here (a volume in compose)
WORKDIR /var/lib/tiergate
EXPOSE 4000
HEALTHCHECK --interval=10s --timeout=5s --start-period=15s --retries=3 \
    CMD ["tiergate", "health", "--port", "4000"]
# No config and no provider keys: demo mode on the built-in simulator. Set provider
# keys and TIERGATE_TOKEN, or mount a config and pass `--config /etc/tiergate/tiergate.yaml`.
CMD ["tiergate", "serve", "--host", "0.0.0.0", "--port", "4000"]
