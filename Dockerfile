# looping-edge container image.
#
# The base is a build argument so production builds FROM the official image and the local
# podman check builds FROM a Debian-built stand-in (scripts/build-base-image) with no other
# difference: both provide `python3` with the venv module on PATH.
#
#   docker build -t looping-edge .
#   scripts/container-smoke    (podman, BASE=the stand-in; see deploy/README.md)
#
# No secret is baked in: the signing key arrives at run time through A2A_SIGNING_KEY_FILE
# (a mounted secret, see docker-compose.yml) or A2A_SIGNING_KEY.
ARG BASE=python:3.11-slim

# --- builder: a venv at /opt/venv holding the project and its dependencies ----------------------
FROM ${BASE} AS builder

# Optional, only for builds behind a private index or a TLS-intercepting proxy; they exist in
# this stage alone, so the runtime image never carries them.
ARG PIP_INDEX_URL
ARG PIP_CERT

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1

RUN python3 -m venv /opt/venv

WORKDIR /src

# Dependencies first, from pyproject.toml alone, so editing the code reuses this (slow) layer.
COPY pyproject.toml ./
RUN python3 -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb')); print('\n'.join(p['build-system']['requires'] + p['project']['dependencies']))" > /tmp/requirements.txt \
 && /opt/venv/bin/pip install --no-compile -r /tmp/requirements.txt

# Then the project itself (.dockerignore admits only what the package needs).
COPY . ./
RUN /opt/venv/bin/pip install --no-deps --no-build-isolation . \
 && /opt/venv/bin/python -m compileall -q /opt/venv/lib

# --- runtime: the venv, a non-root user, nothing else --------------------------------------------
FROM ${BASE} AS runtime

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# A fixed uid outside the base image's ranges, so mounted secrets can be chowned to it.
RUN groupadd --gid 10001 edge \
 && useradd --no-log-init --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin edge

COPY --from=builder /opt/venv /opt/venv

WORKDIR /app
USER 10001:10001

EXPOSE 8080

# No curl in the slim image: probe /livez with the interpreter. Set HEALTHCHECK_PORT when the
# command serves on another port than 8080.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('HEALTHCHECK_PORT', '8080') + '/livez', timeout=4)"]

ENTRYPOINT ["looping-edge"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8080"]
