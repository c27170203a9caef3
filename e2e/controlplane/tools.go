//go:build tools

// Package tools records the control-plane commands the e2e suite builds, so that
// `go mod tidy` keeps their dependencies; build.sh builds each of them by import path.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
