package chaos

import (
	"testing"
	"time"
)

// TestDiskSize checks the tmpfs has room for a long run: 30 minutes at 8
// enqueues a second left a 67 MB database and WAL (16,061 logged enqueues),
// which filled the 64 MiB disk the harness used to mount.
func TestDiskSize(t *testing.T) {
	if got, need := diskSize(Config{Rate: 8, Duration: 30 * time.Minute}), int64(67e6*3/2); got < need {
		t.Errorf("30m at 8/s: %d bytes of disk, want at least %d", got, need)
	}
	if got := diskSize(Config{Rate: 8, Duration: 40 * time.Second}); got > 80<<20 {
		t.Errorf("40s at 8/s: %d bytes of disk; a short run's disk should stay small, so that filling it is quick", got)
	}
}
