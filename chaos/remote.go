package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// api calls errand serve's JSON API.
type api struct {
	base string // http://127.0.0.1:PORT/api/v1
	hc   *http.Client
}

type apiError struct {
	Status int
	Code   string
	Msg    string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, e.Msg)
}

// call sends body as JSON and decodes a 2xx answer into out. A non-2xx
// answer is an *apiError; no answer at all is another error.
func (a *api) call(ctx context.Context, method, path string, body, out any, header ...string) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		json.Unmarshal(b, &e)
		return resp.StatusCode, &apiError{Status: resp.StatusCode, Code: e.Error.Code, Msg: e.Error.Message}
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: answer %.200q: %w", method, path, b, err)
		}
	}
	return resp.StatusCode, nil
}

// remoteWorker is a worker in "another language": it claims, heartbeats and
// reports outcomes through the JSON API, delivering to the sink. When
// stall is set it holds its next job past the lease before acknowledging
// it, as a paused process would: that acknowledgment must be fenced.
type remoteWorker struct {
	name  string
	api   *api
	sink  *sink
	kinds []string
	lease time.Duration
	stall atomic.Int32
	run   *run
}

// loop claims until ctx ends; a claim or job under way is finished, not
// abandoned, so that no lease is left to expire after the run.
func (w *remoteWorker) loop(ctx context.Context) {
	bg := context.WithoutCancel(ctx)
	for ctx.Err() == nil {
		var res struct {
			Jobs []errandtype.Envelope `json:"jobs"`
		}
		st, err := w.api.call(bg, http.MethodPost, "/queues/default/claim", map[string]any{
			"kinds": w.kinds, "lease": w.lease.String(), "max_jobs": 2, "worker": w.name}, &res)
		if err != nil || st == http.StatusNoContent || len(res.Jobs) == 0 {
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		for _, env := range res.Jobs {
			w.work(bg, env)
		}
	}
}

func (w *remoteWorker) work(ctx context.Context, env errandtype.Envelope) {
	w.run.count("remote_claims")
	hbCtx, stopHB := context.WithCancel(ctx)
	cancelled := make(chan struct{}, 1)
	go func() { // renew every third of the lease while delivering
		t := time.NewTicker(w.lease / 3)
		defer t.Stop()
		for {
			select {
			case <-hbCtx.Done():
				return
			case <-t.C:
				var hb struct {
					CancelRequested bool `json:"cancel_requested"`
				}
				if _, err := w.api.call(hbCtx, http.MethodPost, "/jobs/"+env.ID+"/heartbeat",
					map[string]any{"lease_token": env.LeaseToken, "lease": w.lease.String()}, &hb); err == nil && hb.CancelRequested {
					select {
					case cancelled <- struct{}{}:
					default:
					}
				}
			}
		}
	}()
	status, err := w.sink.deliver(ctx, &delivery{ID: env.ID, Kind: env.Kind, Args: env.Args, Attempt: env.Attempt, LeaseToken: env.LeaseToken}, "remote")
	stopHB()
	stale := false
	if w.stall.Load() > 0 {
		w.stall.Add(-1)
		stale = true
		w.run.count("remote_stalls")
		sleepCtx(ctx, w.lease+w.lease/2+500*time.Millisecond)
	}
	select {
	case <-cancelled:
		err = fmt.Errorf("cancelled by an operator")
		status = 0
	default:
	}
	path, body := "/jobs/"+env.ID+"/ack", map[string]any{"lease_token": env.LeaseToken}
	if err != nil || status != http.StatusOK {
		msg := fmt.Sprintf("sink answered %d", status)
		if err != nil {
			msg = err.Error()
		}
		path = "/jobs/" + env.ID + "/fail"
		body = map[string]any{"lease_token": env.LeaseToken, "class": fmt.Sprintf("sink_%d", status), "message": msg,
			"permanent": status/100 == 4, "retry_after": "200ms"}
	}
	// A lost answer is retried; a retry of a recorded outcome is lease_lost.
	for try := 0; ; try++ {
		_, err := w.api.call(ctx, http.MethodPost, path, body, nil)
		var ae *apiError
		code := "ok"
		if err != nil {
			code = "error"
			if asAPIError(err, &ae) {
				code = ae.Code
			}
		}
		if (code == "error" || code == "unavailable" || code == "internal") && try < 5 && ctx.Err() == nil {
			sleepCtx(ctx, 300*time.Millisecond)
			continue
		}
		outcome := "fail"
		if strings.HasSuffix(path, "/ack") {
			outcome = "ack"
		}
		if e := w.sink.recordOutcome(env.ID, env.Attempt, env.LeaseToken, outcome, code == "ok", stale, code); e != nil {
			w.run.logf("record %s: %v", outcome, e)
		}
		if code == "lease_lost" {
			w.run.count("remote_fenced")
		}
		return
	}
}

func asAPIError(err error, out **apiError) bool {
	ae, ok := err.(*apiError)
	if ok {
		*out = ae
	}
	return ok
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
