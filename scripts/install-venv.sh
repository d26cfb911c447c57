#!/usr/bin/env bash
# Install nodedns and its test tools into a virtual environment, .venv/ in this checkout:
#
#   scripts/install-venv.sh          # then .venv/bin/nodedns, .venv/bin/python -m pytest
#                                    # (or `. .venv/bin/activate` for plain `nodedns`, `python`)
#
# For Debian and Ubuntu, whose python3 refuses `pip install` outside a venv (PEP 668,
# "externally-managed-environment"). When `python3 -m venv` cannot make one because the
# python3-venv package is missing (a fresh Debian), it installs that package when it can (as root,
# or with sudo that asks no password) and otherwise says the one command to run. Python 3.11 or
# newer; PYTHON=python3.12 picks another interpreter; an existing .venv is reused. Builds the
# optional C hit path when a C compiler is there (apt-get install gcc).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PY=${PYTHON:-python3}
VENV=.venv
say() { echo "install-venv: $*" >&2; }

command -v "$PY" >/dev/null || { say "$PY is not installed (apt-get install python3)"; exit 1; }
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { say "nodedns needs Python 3.11 or newer; $PY is $("$PY" -V 2>&1)"; exit 1; }

as_root() {  # as_root CMD...: run as root, or fail
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo "$@"
  else return 1
  fi
}

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
  rm -rf "$VENV"
  if ! "$PY" -m venv "$VENV" >/dev/null 2>&1; then
    rm -rf "$VENV"
    pkg="python3-venv"
    minor=$("$PY" -c 'import sys; print(f"python{sys.version_info[0]}.{sys.version_info[1]}-venv")')
    command -v apt-get >/dev/null || { say "$PY cannot make a virtual environment (python -m venv)"; exit 1; }
    say "$PY cannot make a virtual environment: installing $pkg"
    if ! { as_root apt-get update -qq && as_root env DEBIAN_FRONTEND=noninteractive \
             apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null; }; then
      say "run this once, then this script again: sudo apt-get install $pkg"
      exit 1
    fi
    "$PY" -m venv "$VENV" >/dev/null 2>&1 || {
      rm -rf "$VENV"
      as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$minor" >/dev/null \
        || { say "run this once, then this script again: sudo apt-get install $minor"; exit 1; }
      "$PY" -m venv "$VENV"
    }
  fi
fi

command -v cc >/dev/null || command -v gcc >/dev/null \
  || say "no C compiler: the Python hit path will serve (apt-get install gcc for the faster C one)"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -e '.[test]'
say "installed: $("$VENV/bin/nodedns" --version) in $ROOT/$VENV"
