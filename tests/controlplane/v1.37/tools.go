//go:build tools

// Package tools pins the commands that build.py compiles, so that `go mod tidy` keeps
// everything they need in go.sum: the control plane, and the node (kubelet, kube-proxy) of
// tests/node.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
