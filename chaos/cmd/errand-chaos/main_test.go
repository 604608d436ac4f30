package main

import (
	"bytes"
	"strings"
	"testing"
)

// Usage errors exit 2 with one line that says what to change, and print
// nothing on stdout.
func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "give -duration"},
		{[]string{"-duration", "1s", "-store", "mongo"}, `store "mongo": use sqlite or postgres`},
		{[]string{"-duration", "1s", "-faults", "kill_everything"}, `fault "kill_everything": use some of`},
		{[]string{"-duration", "1s", "-store", "postgres", "-pg-url", ""}, "needs a server URL"},
		{[]string{"-duration", "1s", "extra"}, "takes no arguments"},
		{[]string{"-bogus"}, "flag provided but not defined"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != 2 {
			t.Errorf("%q: exit %d, want 2 (stderr %q)", tc.args, code, stderr.String())
		}
		if !strings.Contains(stderr.String(), tc.want) || stdout.Len() != 0 {
			t.Errorf("%q: stderr %q, stdout %q; want %q on stderr only", tc.args, stderr.String(), stdout.String(), tc.want)
		}
	}
}
