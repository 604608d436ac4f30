package errandstore

import (
	"context"
	"errors"
	"testing"
)

// A step that fails is reported and passed over, so that one that fails
// on every pass does not keep the pass from the ids after it.
func TestEachIDPassesOver(t *testing.T) {
	boom := errors.New("boom")
	var seen []string
	out, err := EachID(context.Background(), []string{"a", "b", "c"}, "do", func(id string) (*string, error) {
		seen = append(seen, id)
		switch id {
		case "a":
			return nil, boom
		case "b":
			return nil, nil // nothing to do
		}
		return &id, nil
	})
	if len(seen) != 3 || len(out) != 1 || *out[0] != "c" {
		t.Fatalf("saw %v, got %d results; want every id seen and c's result", seen, len(out))
	}
	if !errors.Is(err, boom) || err.Error() != "do a: boom" {
		t.Fatalf("err = %v, want do a: boom", err)
	}
}

func TestEachIDStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err := EachID(ctx, []string{"a", "b"}, "do", func(string) (*int, error) {
		n++
		cancel()
		return nil, nil
	})
	if n != 1 || !errors.Is(err, context.Canceled) {
		t.Fatalf("ran %d steps, err %v; want 1 and context.Canceled", n, err)
	}
}
