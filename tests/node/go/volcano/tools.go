//go:build tools

// Package tools pins the commands that tests/node/build.py compiles.
package tools

import (
	_ "volcano.sh/volcano/cmd/controller-manager"
	_ "volcano.sh/volcano/cmd/scheduler"
)
