# spendlake service image: `docker build -t spendlake .` then see deploy/docker-compose.yml.
# Build stage: wheels for spendlake and its dependencies (no compilers in the final image).
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY service ./service
COPY connectors ./connectors
COPY rules ./rules
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

# Runtime stage: slim, non-root, read-only friendly (state lives in /var/lib/spendlake).
FROM python:3.11-slim
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/spendlake --create-home spendlake
COPY --from=build /wheels /wheels
# compiled at install (no --no-compile): PYTHONDONTWRITEBYTECODE below only stops writing .pyc at run
# time, so without them every CLI run compiles every module again (+0.66 CPU s a command)
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
ENV SPENDLAKE_CONFIG=/etc/spendlake/spendlake.yaml \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
USER 10001:10001
WORKDIR /var/lib/spendlake
VOLUME ["/var/lib/spendlake"]
EXPOSE 9464
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9464/healthz', timeout=4)"]
# Inside a container the service must listen beyond loopback for Prometheus to reach it;
# publish the port on the host's 127.0.0.1 (see deploy/docker-compose.yml).
ENTRYPOINT ["spendlake", "serve"]
CMD ["--listen", "0.0.0.0:9464"]
