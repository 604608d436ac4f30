//go:build !unix

// Package cputime reads the CPU time the process has used, for benchmarks
// that report it beside wall time.
package cputime

import "time"

// Process reports that this platform's process CPU time is not read.
func Process() (time.Duration, bool) { return 0, false }
