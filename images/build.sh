#!/usr/bin/env bash
# Build one StreamApp image with buildah (vfs storage, chroot isolation: no daemon, no privileges
# beyond root's) on a Debian base made by images/base.sh, from a context images/context.py fills.
# Usage: images/build.sh operator|runtime
# Cached: the image is rebuilt only when its inputs changed — the sources, pyproject.toml, this
# folder and the base's package list, hashed into build/images/<kind>.inputs (the JVM library's
# build output is not an input: its sources are).
set -euo pipefail
cd "$(dirname "$0")/.."

kind=$1
version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
image="localhost/streamapp-$kind:$version"
buildah=(buildah --storage-driver vfs)
case $kind in
  operator) base_name=streamapp-base-python; packages=python3,python3-venv,ca-certificates ;;
  runtime) base_name=streamapp-base-jre
           packages=python3,python3-venv,openjdk-17-jre-headless,procps,tini,ca-certificates ;;
  *) echo "images/build.sh: unknown image '$kind' (operator or runtime)" >&2; exit 2 ;;
esac

mkdir -p build/images
inputs=$( {
  echo "$packages $version"
  find runtime operator images pyproject.toml -type f ! -name '*.pyc' ! -path '*/__pycache__/*' \
    ! -path 'runtime/jvm/target/*' -print0 |
    sort -z | xargs -0 sha256sum
  if [ "$kind" = runtime ]; then
    .venv/bin/python -c 'import importlib.metadata as m; print(m.version("pyspark"))'
  fi
} | sha256sum | cut -c1-16)
stamp=build/images/$kind.inputs
if [ "$(cat "$stamp" 2>/dev/null)" = "$inputs" ] && "${buildah[@]}" inspect --type image "$image" >/dev/null 2>&1; then
  echo "images: $image is up to date (inputs $inputs)"
  exit 0
fi

started=$(date +%s)
base=$(images/base.sh "$base_name" "$packages")
.venv/bin/python images/context.py "$kind" "build/images/$kind"
context_done=$(date +%s)
"${buildah[@]}" bud --quiet --isolation chroot --layers=false \
  --build-arg BASE="$base" --build-arg VERSION="$version" \
  -f "images/$kind/Dockerfile" -t "$image" "build/images/$kind" >/dev/null
finished=$(date +%s)
echo "$inputs" > "$stamp"
size=$("${buildah[@]}" images --format '{{.Size}}' "$image" | head -1)
echo "images: built $image on $base in $((finished - started)) s" \
     "(context $((context_done - started)) s, buildah bud $((finished - context_done)) s), $size"
