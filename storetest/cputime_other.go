//go:build !unix

package storetest

import "time"

// cpuTime is not known on this platform.
func cpuTime() (time.Duration, bool) { return 0, false }
