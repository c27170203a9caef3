#!/usr/bin/env bash
# A base image made from Debian's own packages, for building the images where no container
# registry is reachable: mmdebstrap writes a Debian root filesystem (from the host's apt mirror),
# buildah turns it into a local image. Usage: images/base.sh NAME PACKAGE[,PACKAGE...]
# The image is rebuilt only when its package list (or this script) changed: its name carries the
# hash (localhost/NAME:<hash>), printed on stdout for the Makefile to pass as the BASE build arg.
set -euo pipefail

name=$1
packages=$2
suite=${DEBIAN_SUITE:-bookworm}
buildah=(buildah --storage-driver vfs)
tag=$( { echo "$suite $packages"; cat "$0"; } | sha256sum | cut -c1-12)
image="localhost/$name:$tag"

if "${buildah[@]}" inspect --type image "$image" >/dev/null 2>&1; then
  echo "$image"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
started=$(date +%s)
# minbase: essential packages and apt only; no recommends (they double a JRE's size). Docs are
# removed after installing: excluding them from dpkg breaks the JRE's update-alternatives.
mmdebstrap --quiet --variant=minbase --include="$packages" \
  --aptopt='APT::Install-Recommends "false"' \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/usr/share/doc/*' \
  "$suite" "$work/rootfs.tar" >&2
ctr=$("${buildah[@]}" from scratch)
"${buildah[@]}" add "$ctr" "$work/rootfs.tar" / >&2
"${buildah[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --label org.opencontainers.image.title="$name" \
  --label org.opencontainers.image.description="Debian $suite with $packages (mmdebstrap)" "$ctr" >&2
"${buildah[@]}" commit --quiet "$ctr" "$image" >&2
"${buildah[@]}" rm "$ctr" >/dev/null
echo "base $image: $(( $(date +%s) - started )) s" >&2
echo "$image"
