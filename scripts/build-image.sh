#!/usr/bin/env bash
# Build the nodedns image from daemonset/Containerfile.
#
#   scripts/build-image.sh                                  # localhost/nodedns:0.1.0, public Python base
#   scripts/build-image.sh --tag registry.example.com/nodedns:0.1.0
#   scripts/build-image.sh --local-base                     # no registry reachable: a base from Debian
#   scripts/build-image.sh --base registry.example.com/python:3.11-slim@sha256:...
#   scripts/build-image.sh --ca-bundle /etc/ssl/certs/ca-certificates.crt   # a TLS-intercepting proxy
#
# --local-base builds the base from Debian packages (mmdebstrap --variant=minbase with python3 and
# ca-certificates, bookworm) and imports it as localhost/nodedns-base:bookworm (podman import), so
# nothing is pulled from a container registry; the packages still come from Debian's mirror and
# PyPI (hash-checked, daemonset/requirements.txt). Builds with buildah (`--isolation chroot`, which
# needs no container runtime), else podman, else docker. Prints the image name last.
#
# --ca-bundle FILE (default: $PIP_CERT when set) is given to the build as the secret `pip-ca`, the CA
# bundle pip trusts while it downloads the locked requirements; it is not stored in the image.
#
# Then: push it (`buildah push IMAGE docker://registry.example.com/nodedns:0.1.0`), name it in your
# overlay (examples/overlay/kustomization.yaml: `newName`) and `kubectl apply -k` that overlay.
# scripts/image-sizes IMAGE shows where its bytes go (docs/image.md).
#
# LOCAL_BASE_NAME names the imported base (default localhost/nodedns-base:bookworm; SUITE=trixie for
# another Debian release, MIRROR=URL for another mirror).
#
# Needs root for --local-base (mmdebstrap, podman import) and for buildah's chroot isolation.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
TAG="localhost/nodedns:$VERSION"
BASE=""
LOCAL_BASE=""
CA_BUNDLE=${PIP_CERT:-}
SUITE=${SUITE:-bookworm}
MIRROR=${MIRROR:-}          # e.g. http://deb.debian.org/debian; empty: mmdebstrap's default
LOCAL_BASE_NAME=${LOCAL_BASE_NAME:-localhost/nodedns-base:$SUITE}  # the imported base's name

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) TAG=$2; shift 2 ;;
    --base) BASE=$2; shift 2 ;;
    --local-base) LOCAL_BASE=1; shift ;;
    --ca-bundle) CA_BUNDLE=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "build-image: unknown argument $1" >&2; usage 2 >&2 ;;
  esac
done
[ -n "$BASE" ] && [ -n "$LOCAL_BASE" ] && { echo "build-image: give --base or --local-base, not both" >&2; exit 2; }

if [ -n "$LOCAL_BASE" ]; then
  for tool in mmdebstrap podman; do
    command -v "$tool" >/dev/null || { echo "build-image: --local-base needs $tool (apt-get install $tool)" >&2; exit 2; }
  done
  WORK=$(mktemp -d /tmp/nodedns-image.XXXXXX)
  trap 'rm -rf "$WORK"' EXIT
  echo "build-image: base from Debian $SUITE (mmdebstrap)" >&2
  # shellcheck disable=SC2086  # MIRROR is empty or one URL
  mmdebstrap --quiet --variant=minbase --include=python3,ca-certificates "$SUITE" "$WORK/base.tar" $MIRROR
  podman rmi "$LOCAL_BASE_NAME" >/dev/null 2>&1 || true  # an older one (unless an image still uses it)
  podman import --quiet "$WORK/base.tar" "$LOCAL_BASE_NAME" >/dev/null
  BASE=$LOCAL_BASE_NAME
fi

ARGS=(-f daemonset/Containerfile -t "$TAG")
[ -n "$BASE" ] && ARGS+=(--build-arg "BASE=$BASE")
[ -n "$CA_BUNDLE" ] && ARGS+=(--secret "id=pip-ca,src=$CA_BUNDLE")
echo "build-image: building $TAG${BASE:+ on $BASE}" >&2
if command -v buildah >/dev/null; then
  buildah bud --isolation chroot --quiet "${ARGS[@]}" . >/dev/null
elif command -v podman >/dev/null; then
  podman build --quiet "${ARGS[@]}" . >/dev/null
elif command -v docker >/dev/null; then
  docker build --quiet "${ARGS[@]}" . >/dev/null
else
  echo "build-image: needs buildah, podman or docker" >&2
  exit 2
fi
echo "$TAG"
