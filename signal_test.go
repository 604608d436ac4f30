package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

type approval struct {
	By string `json:"by"`
	OK bool   `json:"ok"`
}

// TestWaitForSignal: a wait with no signal ends the attempt without
// counting it; the signal wakes the job at once, the wait returns its
// value, and the steps before it do not run again. A signal sent before
// the wait is kept for it, and each wait takes the next one.
func TestWaitForSignal(t *testing.T) {
	onBothStores(t, func(t *testing.T, clock *errandtest.Clock, st errandstore.TxStore[*sql.Tx]) {
		ctx := context.Background()
		var asked atomic.Int32
		var got []approval
		c := handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error {
			if _, err := errand.Step(ctx, "ask", func(context.Context) (bool, error) { asked.Add(1); return true, nil }); err != nil {
				return err
			}
			for range 2 {
				a, err := errand.WaitFor[approval](ctx, "approval", 24*time.Hour)
				if err != nil {
					return err
				}
				got = append(got, a)
			}
			return nil
		})
		id := enqueue(t, c, "task", nil).ID
		if r := workOne(t, c, nil); r.Result != errand.ResultSnoozed {
			t.Fatalf("without a signal: %s %q, want snoozed", r.Result, r.Error)
		}
		if j := getJob(t, c, id); j.Attempt != 0 || !j.AvailableAt.Equal(clock.Now().Add(24*time.Hour)) {
			t.Fatalf("waiting: attempt %d, available at %s; want 0, at the timeout", j.Attempt, j.AvailableAt)
		}
		clock.Advance(time.Minute)
		if err := c.Signal(ctx, id, "approval", approval{By: "ana", OK: true}); err != nil {
			t.Fatal(err)
		}
		if j := getJob(t, c, id); !j.AvailableAt.Equal(clock.Now()) {
			t.Fatalf("after the signal the job is available at %s, want now (%s)", j.AvailableAt, clock.Now())
		}
		// The second wait's signal comes before it.
		if err := c.Signal(ctx, id, "approval", approval{By: "bo"}); err != nil {
			t.Fatal(err)
		}
		if r := workOne(t, c, nil); r.Result != errand.ResultSucceeded {
			t.Fatalf("after the signals: %s %q, want succeeded", r.Result, r.Error)
		}
		if len(got) != 2 || got[0] != (approval{By: "ana", OK: true}) || got[1] != (approval{By: "bo"}) {
			t.Errorf("waits got %+v, want ana's then bo's", got)
		}
		if asked.Load() != 1 {
			t.Errorf("the step before the wait ran %d times, want once", asked.Load())
		}
		j := getJob(t, c, id)
		if j.Attempt != 1 {
			t.Errorf("attempt %d, want 1: a wait counts no attempt", j.Attempt)
		}
		if err := c.Signal(ctx, id, "approval", true); !errors.Is(err, errandtype.ErrWrongState) || !strings.Contains(err.Error(), "never read") {
			t.Errorf("a signal to a finished job: %v; want ErrWrongState saying why", err)
		}
	})
}

// TestWaitForTimeout: on the injected clock, a wait whose timeout passes
// returns ErrWaitTimedOut, recorded, and the handler goes on.
func TestWaitForTimeout(t *testing.T) {
	onBothStores(t, func(t *testing.T, clock *errandtest.Clock, st errandstore.TxStore[*sql.Tx]) {
		ctx := context.Background()
		var escalated atomic.Int32
		c := handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error {
			_, err := errand.WaitFor[approval](ctx, "approval", time.Hour)
			if errors.Is(err, errand.ErrWaitTimedOut) {
				_, err = errand.Step(ctx, "escalate", func(context.Context) (int, error) { escalated.Add(1); return 1, nil })
			}
			return err
		})
		id := enqueue(t, c, "task", nil).ID
		workOne(t, c, nil)
		clock.Advance(time.Hour - time.Second)
		if r := workOne(t, c, nil); r.JobID != nil {
			t.Fatalf("before the timeout the job ran: %s", r.Result)
		}
		clock.Advance(time.Second)
		if r := workOne(t, c, nil); r.Result != errand.ResultSucceeded || escalated.Load() != 1 {
			t.Fatalf("at the timeout: %s %q, escalated %d; want succeeded after escalating once", r.Result, r.Error, escalated.Load())
		}
		// A signal after the timeout is refused: the job has finished.
		if err := c.Signal(ctx, id, "approval", approval{OK: true}); !errors.Is(err, errandtype.ErrWrongState) {
			t.Errorf("a late signal: %v", err)
		}
		steps, err := c.Steps(ctx, id)
		if err != nil || len(steps) != 3 || !strings.Contains(string(steps[1].Result), "timed_out") {
			t.Errorf("steps %+v, %v; want the wait, its timeout, escalate", steps, err)
		}
	})
}

// TestSignalWhileTheWaitEnds: a signal that comes after the wait found
// none, while its attempt is still ending, wakes the job all the same.
func TestSignalWhileTheWaitEnds(t *testing.T) {
	onBothStores(t, func(t *testing.T, clock *errandtest.Clock, st errandstore.TxStore[*sql.Tx]) {
		var c *errand.Client[*sql.Tx]
		var got []approval
		c = handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error {
			a, err := errand.WaitFor[approval](ctx, "approval", 24*time.Hour)
			if err != nil {
				// The signal comes now: the job is running, so it finds no
				// wait to wake.
				if serr := c.Signal(context.Background(), j.ID, "approval", approval{By: "ana"}); serr != nil {
					t.Error(serr)
				}
				return err
			}
			got = append(got, a)
			return nil
		})
		id := enqueue(t, c, "task", nil).ID
		if r := workOne(t, c, nil); r.Result != errand.ResultSnoozed {
			t.Fatalf("first attempt: %s, want snoozed", r.Result)
		}
		if j := getJob(t, c, id); !j.AvailableAt.Equal(clock.Now()) {
			t.Fatalf("the job is available at %s; want now (%s): the signal that came as the wait ended must wake it", j.AvailableAt, clock.Now())
		}
		if r := workOne(t, c, nil); r.Result != errand.ResultSucceeded || len(got) != 1 || got[0].By != "ana" {
			t.Fatalf("second attempt: %s, got %+v", r.Result, got)
		}
	})
}

// TestEvents: a running job's handler publishes an event that a caller
// waiting for it reads as soon as it is set, and the last value of its key
// after the job ends; an event never published is ErrNoEvent after the
// wait.
func TestEvents(t *testing.T) {
	onBothStores(t, func(t *testing.T, clock *errandtest.Clock, st errandstore.TxStore[*sql.Tx]) {
		ctx := context.Background()
		published := make(chan struct{})
		release := make(chan struct{})
		c := handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error {
			if err := errand.SetEvent(ctx, "link", "https://example.com/report/7"); err != nil {
				return err
			}
			close(published)
			<-release
			return errand.SetEvent(ctx, "link", "https://example.com/report/7-final")
		})
		id := enqueue(t, c, "task", nil).ID
		done := make(chan *errand.WorkResult)
		go func() { r, _ := c.WorkOne(ctx, nil); done <- r }()
		<-published
		ev, err := c.GetEvent(ctx, id, "link", 0)
		if err != nil || string(ev.Value) != `"https://example.com/report/7"` {
			t.Fatalf("event while the job runs: %+v, %v", ev, err)
		}
		close(release)
		if r := <-done; r.Result != errand.ResultSucceeded {
			t.Fatalf("job: %s %q", r.Result, r.Error)
		}
		if ev, err := c.GetEvent(ctx, id, "link", 0); err != nil || string(ev.Value) != `"https://example.com/report/7-final"` {
			t.Errorf("event after the job: %+v, %v", ev, err)
		}
		if _, err := c.GetEvent(ctx, id, "other", 0); !errors.Is(err, errand.ErrNoEvent) {
			t.Errorf("an event never published: %v, want ErrNoEvent", err)
		}
		if err := errand.SetEvent(ctx, "x", 1); err == nil {
			t.Error("SetEvent outside a handler: no error")
		}
	})
}

// TestStream: what a handler writes to errand.Stream is read, in order,
// as it is written and after the job ends; a write longer than a chunk is
// split between characters.
func TestStream(t *testing.T) {
	onBothStores(t, func(t *testing.T, clock *errandtest.Clock, st errandstore.TxStore[*sql.Tx]) {
		ctx := context.Background()
		// Two bytes a character after one: a chunk's bound falls inside one.
		long := "x" + strings.Repeat("é", errandstore.MaxStreamChunkBytes)
		written := make(chan struct{})
		release := make(chan struct{})
		c := handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error {
			w := errand.Stream(ctx)
			fmt.Fprint(w, "thinking...\n")
			close(written)
			<-release
			if _, err := io.WriteString(w, long); err != nil {
				return err
			}
			_, err := fmt.Fprint(w, "done\n")
			return err
		})
		id := enqueue(t, c, "task", nil).ID
		done := make(chan *errand.WorkResult)
		go func() { r, _ := c.WorkOne(ctx, nil); done <- r }()
		<-written
		page, err := c.ReadStream(ctx, id, -1, 0, 0)
		if err != nil || len(page.Chunks) != 1 || page.Chunks[0].Data != "thinking...\n" || page.State != errandtype.StateRunning {
			t.Fatalf("the stream while the job runs: %+v, %v", page, err)
		}
		close(release)
		if r := <-done; r.Result != errand.ResultSucceeded {
			t.Fatalf("job: %s %q", r.Result, r.Error)
		}
		page, err = c.ReadStream(ctx, id, 0, 0, 0)
		if err != nil || page.State != errandtype.StateSucceeded {
			t.Fatalf("the stream after the job: %+v, %v", page, err)
		}
		var all strings.Builder
		for _, ch := range page.Chunks {
			if !utf8.ValidString(ch.Data) || len(ch.Data) > errandstore.MaxStreamChunkBytes {
				t.Errorf("chunk %d: %d bytes, valid UTF-8 %t", ch.Index, len(ch.Data), utf8.ValidString(ch.Data))
			}
			all.WriteString(ch.Data)
		}
		if all.String() != long+"done\n" || len(page.Chunks) != 4 {
			t.Errorf("read %d chunks, %d bytes after the first; want 4, the long write in three and done", len(page.Chunks), all.Len())
		}
	})
}

// TestWaitsWokenByLocalWork: Result, GetEvent and ReadStream return as
// soon as this process's attempt finishes the job, publishes the event or
// writes to the stream, not at their next poll (lengthened here to an hour,
// so only a wake can end them).
func TestWaitsWokenByLocalWork(t *testing.T) {
	onBothStores(t, func(t *testing.T, clock *errandtest.Clock, st errandstore.TxStore[*sql.Tx]) {
		ctx := context.Background()
		defer errand.SetPollPause(time.Hour)()
		release := make(chan struct{})
		c := handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error {
			if err := errand.SetEvent(ctx, "ready", 1); err != nil {
				return err
			}
			if _, err := fmt.Fprint(errand.Stream(ctx), "line\n"); err != nil {
				return err
			}
			<-release
			return errand.SetOutput(ctx, "done")
		})
		id := enqueue(t, c, "task", nil).ID
		got := make(chan string, 3)
		go func() {
			ev, err := c.GetEvent(ctx, id, "ready", time.Hour)
			got <- fmt.Sprintf("event %v %v", ev != nil && string(ev.Value) == "1", err)
		}()
		go func() {
			p, err := c.ReadStream(ctx, id, -1, 0, time.Hour)
			got <- fmt.Sprintf("stream %v %v", p != nil && len(p.Chunks) == 1, err)
		}()
		go func() {
			r, err := c.Result(ctx, id, time.Hour)
			got <- fmt.Sprintf("result %v %v", r != nil && r.State == errandtype.StateSucceeded, err)
		}()
		for errand.Watching(c) < 3 { // each wait has looked once and sleeps
			time.Sleep(time.Millisecond)
		}
		done := make(chan *errand.WorkResult)
		go func() { r, _ := c.WorkOne(ctx, nil); done <- r }()
		want := map[string]bool{"event true <nil>": true, "stream true <nil>": true}
		for range 2 {
			select {
			case s := <-got:
				if !want[s] {
					t.Errorf("while the job runs: %s", s)
				}
			case <-time.After(time.Minute):
				t.Fatal("the event's and the stream's waits were not woken while the job runs")
			}
		}
		close(release)
		if r := <-done; r.Result != errand.ResultSucceeded {
			t.Fatalf("job: %s %q", r.Result, r.Error)
		}
		select {
		case s := <-got:
			if s != "result true <nil>" {
				t.Errorf("after the job: %s", s)
			}
		case <-time.After(time.Minute):
			t.Fatal("Result's wait was not woken when the job finished")
		}
	})
}
