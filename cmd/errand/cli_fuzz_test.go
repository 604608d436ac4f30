package main

import (
	"errors"
	"flag"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// FuzzParseArgs: every subcommand's flags, parsed from any arguments, end in
// positional arguments that are the input's own, in order, with everything
// after "--" kept verbatim, or in a usage error (or the help); never a panic.
func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{
		"work\x00--queue\x00default=10\x00--exec\x00k=./run.sh",
		"enqueue\x00send_receipt\x00{\"id\":1}\x00--queue\x00mail",
		"enqueue\x00--\x00--queue\x00x", "list\x00--state=dead\x00--json", "list\x00--json=maybe",
		"replay\x00-\x00--", "work\x00--poll", "work\x00---poll=1s", "inspect\x00--limit\x00-5",
		"serve\x00--addr\x00:0\x00--\x00", "bench\x00--jobs\x00x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		args := strings.Split(s, "\x00")
		if len(args) > 20 {
			return
		}
		var c *command
		for _, cand := range commands {
			if cand.name == args[0] {
				c = cand
			}
		}
		if c == nil {
			c = commands[len(args[0])%len(commands)]
		}
		args = args[1:]
		fs := newFlagSet(c.name)
		c.setup(fs, &env{stdout: io.Discard, stderr: io.Discard, logger: slog.New(slog.DiscardHandler)})
		pos, err := parseArgs(fs, args)
		if err != nil {
			var ue *usageError
			if !errors.Is(err, flag.ErrHelp) && !errors.As(err, &ue) {
				t.Fatalf("errand %s %q: %v (%T), want a usage error", c.name, args, err, err)
			}
			return
		}
		// pos is a subsequence of args.
		rest := args
		for _, p := range pos {
			i := slices.Index(rest, p)
			if i < 0 {
				t.Fatalf("errand %s %q: positional %q of %q is not in the arguments, in order", c.name, args, p, pos)
			}
			rest = rest[i+1:]
		}
		if i := slices.Index(args, "--"); i >= 0 && !slices.Equal(pos[len(pos)-(len(args)-i-1):], args[i+1:]) {
			t.Fatalf("errand %s %q: positional %q, want everything after -- kept as it is", c.name, args, pos)
		}
	})
}
