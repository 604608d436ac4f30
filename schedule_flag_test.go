package errand_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/errandhq/errand"
)

// FuzzParseScheduleFlag: a flag accepted, with or without a time zone,
// writes back as NAME=SPEC KIND [JSON] from the schedule's parts and reads
// back as the same schedule, ticking alike; a flag refused is an
// *InputError with a message.
func FuzzParseScheduleFlag(f *testing.F) {
	for _, s := range []string{
		`nightly=0 3 * * * cleanup {"days": 30}`, "heartbeat=@every 30s ping",
		"report=CRON_TZ=Europe/Paris 0 9 * * MON-FRI send_report", "x=*/10 * * * * * tick [1, 2]",
		"n=@hourly report 42", "n=@hourly report {", "=@hourly report", "n=@hourly", "n", "",
		"a b=@hourly k", "n=@hourly a b", "n=0 0 30 2 * k", "n=TZ= k", "n=@every 1ms k", " n = @daily  k ",
		"n=TZ=America/New_York 30 2 * * * k null", "n=@weekly k [", "n=@every 1m k {}",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		f.Fatal(err)
	}
	start := time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC) // the eve of a DST change
	f.Fuzz(func(t *testing.T, s string, zoned bool) {
		if len(s) > 300 {
			return
		}
		var opts *errand.ScheduleOpts
		if zoned {
			opts = &errand.ScheduleOpts{Location: paris}
		}
		sc, err := errand.ParseScheduleFlag(s, opts)
		if err != nil {
			var ie *errand.InputError
			if !errors.As(err, &ie) || ie.Field == "" || ie.Message == "" {
				t.Fatalf("ParseScheduleFlag(%q): %v (%T), want an *InputError", s, err, err)
			}
			return
		}
		raw, ok := sc.Args().(errand.RawArgs)
		if !ok {
			t.Fatalf("ParseScheduleFlag(%q): args %T, want RawArgs", s, sc.Args())
		}
		// The stored spec names its zone, so the flag reads back without one.
		flag := sc.Name() + "=" + sc.Spec() + " " + raw.Kind() + " " + string(raw.JSON)
		back, err := errand.ParseScheduleFlag(flag, nil)
		if err != nil {
			t.Fatalf("ParseScheduleFlag(%q) accepted, written back as %q, refused: %v", s, flag, err)
		}
		braw := back.Args().(errand.RawArgs)
		if back.Name() != sc.Name() || back.Spec() != sc.Spec() || braw.Kind() != raw.Kind() || !bytes.Equal(braw.JSON, raw.JSON) {
			t.Fatalf("ParseScheduleFlag(%q) = %q %q %q %s, written back as %q: %q %q %q %s", s,
				sc.Name(), sc.Spec(), raw.Kind(), raw.JSON, flag, back.Name(), back.Spec(), braw.Kind(), braw.JSON)
		}
		from := start
		for range 3 {
			a, b := sc.Next(from), back.Next(from)
			if !a.Equal(b) {
				t.Fatalf("%q from %v: next %v, read back: %v", s, from, a, b)
			}
			if a.IsZero() {
				break
			}
			from = a
		}
	})
}
