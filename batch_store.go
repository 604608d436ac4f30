package errand

import (
	"strconv"
)

// DeadHookJobID is the id of the on-dead job of job id when it died in its
// delivery cycle replays (the job's Replays when it died): "ID.dead.N". A
// job replayed and dead again gets a new on-dead job; one death never gets
// two, however many processes notice it.
func DeadHookJobID(jobID string, replays int) string {
	return jobID + ".dead." + strconv.Itoa(replays)
}
