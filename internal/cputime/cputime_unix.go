//go:build unix

// Package cputime reads the CPU time the process has used, for benchmarks
// that report it beside wall time.
package cputime

import (
	"syscall"
	"time"
)

// Process is the CPU time this process has used, user and system, and
// whether the platform told.
func Process() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
