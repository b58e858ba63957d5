# gang-scheduler image: `docker build -t gang-scheduler:0.1.0 .`
# The builder installs gang and its dependencies into a virtual environment; the final image
# holds only that environment and the Python runtime, and runs as an unprivileged user.

FROM python:3.11-slim AS builder

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# the same path in both stages: the venv's scripts name their interpreter by absolute path
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

WORKDIR /src
COPY pyproject.toml README.md ./
COPY gang ./gang
# pip compiles the bytecode here: the root filesystem is read-only at run time
RUN pip install . \
    && gang --help > /dev/null


FROM python:3.11-slim

LABEL org.opencontainers.image.title="gang-scheduler" \
      org.opencontainers.image.description="A gang scheduler for Kubernetes" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0"

COPY --from=builder /opt/venv /opt/venv

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1

# a numeric non-root user (65532, "nonroot" by convention), so runAsNonRoot can verify it
USER 65532:65532
WORKDIR /tmp

EXPOSE 8080

ENTRYPOINT ["gang"]
CMD ["run", "--config", "/etc/gang/config.yaml"]
