package deadhook

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// fakeStore holds dead jobs without hooks and the cursors of their kinds.
type fakeStore struct {
	dead     []*errandtype.Job // oldest first
	cursors  map[string]time.Time
	advances []time.Time
}

func (f *fakeStore) JobListDeadUnhooked(_ context.Context, p *errandstore.JobListDeadUnhookedParams) ([]*errandtype.Job, error) {
	var out []*errandtype.Job
	for _, j := range f.dead {
		if !j.FinishedAt.Before(p.Since) && len(out) < p.Limit {
			out = append(out, j)
		}
	}
	return out, nil
}

func (f *fakeStore) DeadHookCursors(_ context.Context, p *errandstore.DeadHookCursorsParams) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	for _, k := range p.Kinds {
		if at, ok := f.cursors[k]; ok {
			out[k] = at
		}
	}
	return out, nil
}

func (f *fakeStore) DeadHookCursorAdvance(_ context.Context, p *errandstore.DeadHookCursorAdvanceParams) error {
	f.advances = append(f.advances, p.To)
	for _, k := range p.Kinds {
		if p.To.After(f.cursors[k]) {
			f.cursors[k] = p.To
		}
	}
	return nil
}

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func dead(id string, at time.Time) *errandtype.Job {
	return &errandtype.Job{ID: id, Kind: "charge", State: errandtype.StateDead, FinishedAt: &at}
}

func scanner(st *fakeStore, now *time.Time, fire func(*errandtype.Job) error) *Scanner {
	return New(Config{
		Now:     func(context.Context) (time.Time, error) { return *now, nil },
		Store:   st,
		Cursors: st,
		Logger:  slog.New(slog.DiscardHandler),
		Kinds:   []string{"charge"},
		Every:   time.Minute,
		Fire:    func(_ context.Context, j *errandtype.Job) error { return fire(j) },
	})
}

// TestScanHoldsCursorAtRefusedHook: a hook the store refused holds the
// cursor at its death, so that the next worker to start looks at it again;
// a hook that can never be enqueued (invalid input) does not hold it.
func TestScanHoldsCursorAtRefusedHook(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want time.Time
	}{
		{"store refused", errandtype.ErrStoreUnavailable, t0.Add(time.Minute)},
		{"invalid", &errandtype.InputError{Field: "args", Message: "bad"}, t0.Add(time.Hour - Overlap)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &fakeStore{dead: []*errandtype.Job{dead("a", t0), dead("b", t0.Add(time.Minute))}, cursors: map[string]time.Time{}}
			now := t0.Add(time.Hour)
			s := scanner(st, &now, func(j *errandtype.Job) error {
				if j.ID == "b" {
					return tc.err
				}
				return nil
			})
			n, err := s.Scan(t.Context())
			if err != nil || n != 2 {
				t.Fatalf("Scan = %d, %v; want 2 jobs looked at", n, err)
			}
			if got := st.cursors["charge"]; !got.Equal(tc.want) {
				t.Fatalf("cursor at %s; want %s", got, tc.want)
			}
		})
	}
}

// TestScanStartsFromEarliestCursor: a first look starts from the store's
// cursor, skipping deaths before it; later looks start from the last look
// less the overlap, and write the cursor again only once it moved
// CursorEvery.
func TestScanStartsFromEarliestCursor(t *testing.T) {
	st := &fakeStore{dead: []*errandtype.Job{dead("old", t0), dead("new", t0.Add(2*time.Hour))}, cursors: map[string]time.Time{"charge": t0.Add(time.Hour)}}
	now := t0.Add(3 * time.Hour)
	var fired []string
	s := scanner(st, &now, func(j *errandtype.Job) error { fired = append(fired, j.ID); return nil })
	if _, err := s.Scan(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(fired) != 1 || fired[0] != "new" {
		t.Fatalf("first look fired %v; want only the death after the cursor", fired)
	}
	now = now.Add(CursorEvery / 2)
	if _, err := s.Scan(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(st.advances) != 1 {
		t.Fatalf("cursor written %d times after a look that moved less than CursorEvery; want once", len(st.advances))
	}
	now = now.Add(CursorEvery)
	if _, err := s.Scan(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(st.advances) != 2 || !st.advances[1].Equal(now.Add(-Overlap)) {
		t.Fatalf("cursor writes %v; want a second one at now less the overlap", st.advances)
	}
}

// TestScanPagesOfOneInstant: a page whose deaths all share the instant the
// look starts from ends the look and holds the cursor there, rather than
// reading the same page again.
func TestScanPagesOfOneInstant(t *testing.T) {
	st := &fakeStore{cursors: map[string]time.Time{"charge": t0}}
	for range Page + 1 {
		st.dead = append(st.dead, dead("same", t0))
	}
	now := t0.Add(time.Hour)
	s := scanner(st, &now, func(*errandtype.Job) error { return nil })
	n, err := s.Scan(t.Context())
	if err != nil || n != Page {
		t.Fatalf("Scan = %d, %v; want one page", n, err)
	}
	if got := st.cursors["charge"]; !got.Equal(t0) {
		t.Fatalf("cursor at %s; want held at the instant, %s", got, t0)
	}
}
