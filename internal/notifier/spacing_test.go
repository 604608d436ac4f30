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

// TestNotifySpacing: a lone announcement goes at once; names that come
// within a millisecond of the last announcement go together, a millisecond
// after it; and once the sender has been idle for a millisecond, the next
// goes at once again. A steady trickle of enqueues a few milliseconds apart
// is so announced as each commits, not held for a window.
func TestNotifySpacing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	clock := errandtest.NewClock(t0)
	sent := make(sentQueues, 10)
	n := notifier.New(sent, &notifier.Echoes{}, clock, slog.New(slog.DiscardHandler))
	defer n.Close()
	next := func(step string, want ...string) {
		t.Helper()
		select {
		case got := <-sent:
			if !slices.Equal(got, want) {
				t.Fatalf("%s: announced %q, want %q", step, got, want)
			}
		case <-ctx.Done():
			t.Fatalf("%s: nothing announced, want %q; the clock's timers: %v", step, want, clock.Armed())
		}
	}

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
