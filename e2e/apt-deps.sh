#!/usr/bin/env bash
# Debian packages some targets need (e2e: prometheus; images: buildah, mmdebstrap, umoci), installed
# with apt-get only when their command is missing, so a second run costs nothing.
# Usage: e2e/apt-deps.sh PURPOSE COMMAND=PACKAGE [COMMAND=PACKAGE ...]
set -euo pipefail
purpose=$1
shift
missing=()
for pair in "$@"; do
  command -v "${pair%%=*}" >/dev/null 2>&1 || missing+=("${pair#*=}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: $purpose needs the Debian package(s) ${missing[*]}, and apt-get is not available here;" \
       "install them with your system's package manager (or put their commands on PATH)" >&2
  exit 1
fi
as_root=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || {
    echo "setup: $purpose needs ${missing[*]}: run \`apt-get install ${missing[*]}\` as root (no sudo here)" >&2
    exit 1
  }
  as_root=(sudo)
fi
echo "setup: installing ${missing[*]} with apt-get for $purpose (log: /tmp/streamapp-apt.log)"
export DEBIAN_FRONTEND=noninteractive
if ! { "${as_root[@]}" apt-get install -y --no-install-recommends "${missing[@]}" ||
       { "${as_root[@]}" apt-get update && "${as_root[@]}" apt-get install -y --no-install-recommends "${missing[@]}"; }; } \
     >/tmp/streamapp-apt.log 2>&1; then
  tail -20 /tmp/streamapp-apt.log >&2
  echo "setup: apt-get could not install ${missing[*]} (see /tmp/streamapp-apt.log)" >&2
  exit 1
fi
