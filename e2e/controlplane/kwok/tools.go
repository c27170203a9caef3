//go:build tools

// Package tools records the kwok command build.sh builds from this module.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
