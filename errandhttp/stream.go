package errandhttp

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
)

// streamReader reads a job's output stream; *errand.Client is one.
type streamReader interface {
	ReadStream(ctx context.Context, id string, after, limit int, wait time.Duration) (*errandstore.StreamPage, error)
}

// streamWait bounds each wait of a server-sent stream for new chunks, so a
// client that has gone is noticed.
const streamWait = 15 * time.Second

// streamAfter reads where a stream's reader is: ?after=, else the
// Last-Event-ID header of a reconnecting event source, else -1 (from the
// start).
func streamAfter(r *http.Request) (int, error) {
	s := firstOf(r.URL.Query().Get("after"), r.Header.Get("Last-Event-ID"))
	if s == "" {
		return -1, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < -1 {
		return 0, badRequest("after %q: give the index of the last chunk read, or -1 for all", s)
	}
	return n, nil
}

// serveStream answers job id's output stream after chunk after as
// server-sent events, one per chunk (its id the chunk's index, so a client
// resumes with Last-Event-ID), as the job writes them, until the job has
// finished and every chunk is sent, then an "end" event whose data is the
// job's state. The JSON API and the dashboard's live stream share it.
func serveStream(w http.ResponseWriter, r *http.Request, c streamReader, id string, after int, log *slog.Logger) error {
	// The first read answers an unknown job with an error, before the
	// events begin.
	page, err := c.ReadStream(r.Context(), id, after, errand.MaxStreamPage, 0)
	if err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	for {
		// A stream outlives the server's write timeout: each round of
		// events has its own. An error means the server sets none.
		_ = rc.SetWriteDeadline(time.Now().Add(time.Minute))
		for _, c := range page.Chunks {
			fmt.Fprintf(w, "id: %d\n", c.Index)
			for _, line := range strings.Split(c.Data, "\n") {
				fmt.Fprintf(w, "data: %s\n", line)
			}
			fmt.Fprint(w, "\n")
			after = c.Index
		}
		if len(page.Chunks) == 0 && page.State.Terminal() {
			fmt.Fprintf(w, "event: end\ndata: %s\n\n", page.State)
			_ = rc.Flush()
			return nil
		}
		if len(page.Chunks) == 0 {
			fmt.Fprint(w, ": waiting\n\n") // a comment, so a client that has gone is noticed
		}
		if err := rc.Flush(); err != nil {
			return nil // the client has gone
		}
		wait := streamWait
		if len(page.Chunks) == errand.MaxStreamPage {
			wait = 0 // more are there already
		}
		if page, err = c.ReadStream(r.Context(), id, after, errand.MaxStreamPage, wait); err != nil {
			if r.Context().Err() == nil {
				log.Warn("stream read failed; the client resumes with Last-Event-ID", "job_id", id, "err", err)
			}
			return nil
		}
	}
}
