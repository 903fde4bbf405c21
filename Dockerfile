# hami-dra-webhook: the admission webhook image. Two stages: the first builds a virtual
# environment from wheels, the second copies only that environment onto a slim Python.
# No compilers or build tools reach the final image. Reproducible inputs: the base image by
# digest (a tag can be re-pushed, a digest cannot), every dependency from requirements.lock and
# the build backend from requirements-build.lock, each pinned with its hashes (pip refuses
# anything else).

ARG BASE=python:3.11.11-slim-bookworm@sha256:081075da77b2b55c23c088251026fb69a7b2bf92471e491ff5fd75c192fd38e5

FROM ${BASE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY requirements.lock requirements-build.lock ./
RUN python -m venv /opt/hami-dra-webhook \
 && /opt/hami-dra-webhook/bin/pip install --no-compile --require-hashes --only-binary=:all: \
      -r requirements.lock -r requirements-build.lock
COPY pyproject.toml README.md LICENSE ./
COPY hami_dra_webhook ./hami_dra_webhook
RUN /opt/hami-dra-webhook/bin/pip install --no-compile --no-deps --no-build-isolation . \
 && /opt/hami-dra-webhook/bin/python -m compileall -q /opt/hami-dra-webhook

FROM ${BASE}
# Set by a release build (docs/install.md): the commit and the build time, RFC 3339.
ARG VERSION=0.2.0
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="hami-dra-webhook" \
      org.opencontainers.image.description="Runs HAMi legacy GPU-sharing manifests unchanged on Kubernetes DRA" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.url="https://github.com/Project-HAMi/hami-dra-webhook" \
      org.opencontainers.image.documentation="https://github.com/Project-HAMi/hami-dra-webhook/tree/main/docs" \
      org.opencontainers.image.source="https://github.com/Project-HAMi/hami-dra-webhook"
COPY --from=build /opt/hami-dra-webhook /opt/hami-dra-webhook
# Byte code is compiled at build time; nothing is written at run time, so the root filesystem
# can be read-only (the chart mounts an emptyDir on /tmp for the rest).
ENV PATH=/opt/hami-dra-webhook/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
# 8443: HTTPS (/mutate, /validate-workloads); 8080: plain HTTP probes and /metrics
EXPOSE 8443 8080
ENTRYPOINT ["hami-dra-webhook"]
CMD ["serve"]
