package notifier_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/internal/notifier"
)

// sentQueues is an errandstore.Notifier that hands each NotifyQueues call's
// queues to the test.
type sentQueues chan []string

func (s sentQueues) NotifyQueues(_ context.Context, queues []string) error {
	s <- queues
	return nil
}

func (s sentQueues) ListenQueues(ctx context.Context) (<-chan string, error) {
	panic("not listened to")
}

// newRig returns a notifier on a clock injected at t0, closed when the
// test ends, what it sends, and its echoes.
func newRig(t *testing.T) (context.Context, time.Time, *errandtest.Clock, sentQueues, *notifier.Notifier, *notifier.Echoes) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	clock := errandtest.NewClock(t0)
	sent := make(sentQueues, 10)
	echoes := &notifier.Echoes{}
	n := notifier.New(sent, echoes, clock, slog.New(slog.DiscardHandler))
	t.Cleanup(n.Close)
	return ctx, t0, clock, sent, n, echoes
}

// expect returns a check that the next call announced want.
func (s sentQueues) expect(ctx context.Context, t *testing.T, clock *errandtest.Clock) func(step string, want ...string) {
	return func(step string, want ...string) {
		t.Helper()
		select {
		case got := <-s:
			if !slices.Equal(got, want) {
				t.Fatalf("%s: announced %q, want %q", step, got, want)
			}
		case <-ctx.Done():
			t.Fatalf("%s: nothing announced, want %q; the clock's timers: %v", step, want, clock.Armed())
		}
	}
}

// TestNotifySpacing: a lone announcement goes at once; names that come
// within a millisecond of the last announcement go together, a millisecond
// after it; and once the sender has been idle for a millisecond, the next
// goes at once again. A steady trickle of enqueues a few milliseconds apart
// is so announced as each commits, not held for a window.
func TestNotifySpacing(t *testing.T) {
	ctx, t0, clock, sent, n, _ := newRig(t)
	next := sent.expect(ctx, t, clock)

	n.Notify([]string{"a"}, nil)
	next("a lone enqueue", "a")
	if err := clock.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got, want := clock.Armed(), []time.Time{t0.Add(time.Millisecond)}; !slices.Equal(got, want) {
		t.Fatalf("after an announcement the sender waits until %v, want %v", got, want)
	}
	n.Notify([]string{"c"}, nil)
	n.Notify([]string{"b", "c"}, nil)
	select {
	case got := <-sent:
		t.Fatalf("%q announced within the spacing", got)
	default:
	}
	clock.Advance(time.Millisecond)
	next("two enqueues within the spacing", "b", "c")

	// Idle for a millisecond, the sender ends; the next goes at once.
	if err := clock.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Millisecond)
	if err := clock.BlockUntil(ctx, 0); err != nil {
		t.Fatal(err)
	}
	n.Notify([]string{"d"}, nil)
	next("an enqueue a millisecond after the last announcement", "d")
}

// TestNotifyInline: a lone enqueue announces in its own insert when no
// announcement is pending or in flight and the last ended a millisecond
// ago or more; what comes meanwhile waits for it and goes a millisecond
// after it; an insert that did not announce gives its turn back at once.
func TestNotifyInline(t *testing.T) {
	ctx, _, clock, sent, n, echoes := newRig(t)
	none := func(step string) {
		t.Helper()
		select {
		case got := <-sent:
			t.Fatalf("%s: %q announced after the insert", step, got)
		default:
		}
	}
	next := sent.expect(ctx, t, clock)

	done, ok := n.Inline([]string{"a"})
	if !ok {
		t.Fatal("an idle notifier refused an inline announcement")
	}
	if got := echoes.Snapshot()["a"]; got != 1 {
		t.Fatalf("an inline announcement counted %d echoes, want 1", got)
	}
	if _, ok := n.Inline([]string{"b"}); ok {
		t.Fatal("a second inline announcement reserved while the first is in flight")
	}
	n.Notify([]string{"c"}, nil)
	none("while an insert announces")
	done(true)
	none("within the spacing after an inline announcement")
	if _, ok := n.Inline([]string{"d"}); ok {
		t.Fatal("an inline announcement reserved while one is pending")
	}
	if err := clock.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Millisecond)
	next("what came during the insert", "c")

	// Idle again, and a millisecond on: the next may go inline.
	if err := clock.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Millisecond)
	for done, ok = n.Inline([]string{"e"}); !ok; done, ok = n.Inline([]string{"e"}) {
		select { // the sender ends soon after its timer fires
		case <-ctx.Done():
			t.Fatal("inline refused a millisecond after the last announcement")
		case <-time.After(time.Millisecond):
		}
	}
	done(true)
	if _, ok := n.Inline([]string{"f"}); ok {
		t.Fatal("inline reserved within the spacing after an inline announcement")
	}

	// An insert that did not announce (a duplicate, an error) takes its
	// echo back, and what waited for it goes at once.
	clock.Advance(time.Millisecond)
	done, ok = n.Inline([]string{"g"})
	if !ok {
		t.Fatal("inline refused a millisecond after the last inline announcement")
	}
	n.Notify([]string{"h"}, nil)
	done(false)
	next("after an insert that did not announce", "h")
	if got := echoes.Snapshot()["g"]; got != 0 {
		t.Fatalf("an insert that did not announce left %d echoes, want 0", got)
	}
}
