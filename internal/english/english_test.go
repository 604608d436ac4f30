package english

import "testing"

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		n    int
		noun string
		want string
	}{
		{0, "job", "0 jobs"},
		{1, "job", "1 job"},
		{2, "attempt", "2 attempts"},
		{1, "batch", "1 batch"},
		{3, "batch", "3 batches"},
		{2, "entry", "2 entries"},
		{2, "key", "2 keys"},
		{-1, "job", "-1 jobs"},
	} {
		if got := Count(tc.n, tc.noun); got != tc.want {
			t.Errorf("Count(%d, %q) = %q, want %q", tc.n, tc.noun, got, tc.want)
		}
	}
}
