package errand

import (
	"time"
)

// ScheduleUniqueKey is the unique key of the job of schedule name's tick:
// "errand.cron:NAME:TICK", the tick in RFC 3339 UTC with its fraction of a
// second when it has one. The key, not leadership, is what keeps a tick
// from enqueueing twice.
func ScheduleUniqueKey(name string, tick time.Time) string {
	return "errand.cron:" + name + ":" + tick.UTC().Format(time.RFC3339Nano)
}
