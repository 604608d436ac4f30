package errand

import "time"

// SetPollPause sets the first pause of the waits that poll (Result,
// GetEvent, ReadStream) and returns a func that restores it.
func SetPollPause(d time.Duration) (restore func()) {
	old := pollPause
	pollPause = d
	return func() { pollPause = old }
}

// Watching counts the waits of c woken by its own work.
func Watching[TTx any](c *Client[TTx]) int64 { return c.watches.n.Load() }
