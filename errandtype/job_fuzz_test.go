package errandtype

import (
	"strings"
	"testing"
)

// FuzzParseJobState: a name is accepted exactly when it is a state's, and
// a refusal quotes the name and lists every state.
func FuzzParseJobState(f *testing.F) {
	for _, s := range JobStates {
		f.Add(string(s))
	}
	for _, s := range []string{"", "Queued", " queued", "queued ", "done", "cancelled\x00", "canceled"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		st, err := ParseJobState(s)
		if err != nil {
			if st != "" {
				t.Fatalf("ParseJobState(%q) = %q with error %v; want no state", s, st, err)
			}
			if JobState(s).Valid() {
				t.Fatalf("ParseJobState(%q) refuses a valid state: %v", s, err)
			}
			if msg := err.Error(); !strings.Contains(msg, "state") || !strings.Contains(msg, StateNames()) {
				t.Fatalf("ParseJobState(%q): %q, want the error to name the state and list %s", s, msg, StateNames())
			}
			return
		}
		if !st.Valid() || string(st) != s {
			t.Fatalf("ParseJobState(%q) = %q, want the valid state of that name", s, st)
		}
	})
}
