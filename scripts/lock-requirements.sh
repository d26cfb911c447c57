#!/usr/bin/env bash
# Refresh daemonset/requirements.txt, the hash-locked dependencies the image installs, from
# pyproject.toml (its dependencies plus the build's setuptools and wheel), against PyPI:
#
#   scripts/lock-requirements.sh            # needs pip-tools: pip install pip-tools
#
# Every version is pinned and every file listed with its sha256; the image build installs with
# --require-hashes, so a changed file on the index fails the build. Resolved for the Python that
# runs this (3.11, the image's).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v pip-compile >/dev/null || { echo "lock-requirements: pip install pip-tools" >&2; exit 2; }
# no local pip configuration (extra indexes, find-links, constraints): PyPI only
PIP_CONFIG_FILE=/dev/null PIP_FIND_LINKS= PIP_CONSTRAINT= pip-compile --quiet --generate-hashes --allow-unsafe \
  --strip-extras --build-deps-for=wheel --index-url https://pypi.org/simple --no-emit-index-url \
  --output-file daemonset/requirements.txt pyproject.toml
