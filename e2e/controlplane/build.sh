#!/usr/bin/env bash
# Why this exists: the e2e suite runs a real Kubernetes control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, KWOK) plus helm on loopback, and no Docker or
# release tarballs are reachable here -- only the Go module proxy. This builds each binary from
# the pinned modules next to this script into $STREAMAPP_CACHE/bin. It is idempotent: a binary
# whose stamp matches the pinned version and the module's go.mod/go.sum is not rebuilt.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${STREAMAPP_CACHE:-$HOME/.cache/streamapp}"
BIN="$CACHE/bin"
GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"

export GOMODCACHE="$CACHE/go/mod"
export GOCACHE="$CACHE/go/build"
export GOFLAGS="-mod=mod"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
export CGO_ENABLED=0

[[ -x "$GO" ]] || { echo "build.sh: no Go toolchain found (set GO=/path/to/go)" >&2; exit 1; }
mkdir -p "$BIN" "$GOMODCACHE" "$GOCACHE"

# version of module $2 as required in the go.mod of module dir $1
pinned() { awk -v m="$2" '{ sub(/^require[ \t]+/, "") } $1 == m && $2 ~ /^v/ {print $2; exit}' "$1/go.mod"; }

# build NAME MODULE_DIR PACKAGE VERSION [LDFLAGS...]
build() {
  local name="$1" dir="$2" pkg="$3" version="$4"; shift 4
  local ldflags="-s -w $*"
  local stamp_file="$BIN/.$name.stamp"
  local stamp
  stamp="$pkg@$version $("$GO" env GOVERSION 2>/dev/null) $(cat "$dir/go.mod" "$dir/go.sum" | sha256sum | cut -c1-16)"
  if [[ -x "$BIN/$name" && -f "$stamp_file" && "$(cat "$stamp_file")" == "$stamp" ]]; then
    printf '%-24s cached  %s\n' "$name" "$version"
    return
  fi
  local start=$SECONDS log="$BIN/.$name.build.log"
  if ! (cd "$dir" && "$GO" build -p 2 -trimpath -ldflags="$ldflags" -o "$BIN/$name.tmp" "$pkg") >"$log" 2>&1; then
    tail -30 "$log" >&2
    echo "build.sh: building $name ($pkg@$version) failed; full log: $log" >&2
    exit 1
  fi
  mv -f "$BIN/$name.tmp" "$BIN/$name"
  echo "$stamp" >"$stamp_file"
  printf '%-24s built   %s in %ds\n' "$name" "$version" "$((SECONDS - start))"
}

K8S="$(pinned "$HERE" k8s.io/kubernetes)"
ETCD="$(pinned "$HERE" go.etcd.io/etcd/server/v3)"
HELM="$(pinned "$HERE/helm" helm.sh/helm/v3)"
KWOK="$(pinned "$HERE/kwok" sigs.k8s.io/kwok)"
for var in K8S ETCD HELM KWOK; do
  [[ -n "${!var}" ]] || { echo "build.sh: no pinned version for $var found in $HERE/**/go.mod" >&2; exit 1; }
done

# Without these the binaries report v0.0.0-master, which helm's kubeVersion checks reject.
minor="${K8S#v1.}"; minor="${minor%%.*}"
kver="-X k8s.io/component-base/version.gitVersion=$K8S -X k8s.io/component-base/version.gitMajor=1"
kver="$kver -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"

build etcd                    "$HERE"      go.etcd.io/etcd/server/v3                 "$ETCD"
build kube-apiserver          "$HERE"      k8s.io/kubernetes/cmd/kube-apiserver          "$K8S" "$kver"
build kube-controller-manager "$HERE"      k8s.io/kubernetes/cmd/kube-controller-manager "$K8S" "$kver"
build kube-scheduler          "$HERE"      k8s.io/kubernetes/cmd/kube-scheduler          "$K8S" "$kver"
build kwok                    "$HERE/kwok" sigs.k8s.io/kwok/cmd/kwok                 "$KWOK"
# The kwok binary has no built-in behaviour: node and pod lifecycles come from Stage objects. Use
# the default stages shipped in the pinned kwok module (the set kwokctl uses), so they move with it.
kwok_stages() {
  local out="$BIN/kwok-stages.yaml" stamp="sigs.k8s.io/kwok@$KWOK stages"
  if [[ -f "$out" && "$(cat "$BIN/.kwok-stages.stamp" 2>/dev/null)" == "$stamp" ]]; then
    printf '%-24s cached  %s\n' kwok-stages.yaml "$KWOK"
    return
  fi
  local src
  src="$(cd "$HERE/kwok" && "$GO" list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage"
  {
    for f in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease \
      pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
      [[ -f "$src/$f.yaml" ]] || { echo "build.sh: kwok stage $src/$f.yaml is missing" >&2; exit 1; }
      echo "---"
      cat "$src/$f.yaml"
    done
  } >"$out.tmp"
  mv -f "$out.tmp" "$out"
  echo "$stamp" >"$BIN/.kwok-stages.stamp"
  printf '%-24s built   %s\n' kwok-stages.yaml "$KWOK"
}
kwok_stages
build helm                    "$HERE/helm" helm.sh/helm/v3/cmd/helm                  "$HELM" \
  "-X helm.sh/helm/v3/internal/version.version=$HELM -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
