package faktory

import "testing"

func TestErrorClass(t *testing.T) {
	for errtype, want := range map[string]string{
		"":                             "error",
		"undefined":                    "error",
		"TypeError":                    "type_error",
		"HTTPError":                    "http_error",
		"Net::ReadTimeout":             "net_read_timeout",
		"ActiveRecord::RecordNotFound": "active_record_record_not_found",
		"ECONNREFUSED":                 "econnrefused",
		"*errors.errorString":          "errors_error_string",
		"receipt_unavailable":          "receipt_unavailable",
		"404NotFound":                  "e404_not_found",
		"Ünïcode":                      "n_code",
		"!!!":                          "error",
		"NameThatGoesOnAndOnAndOnAndOnAndOnAndOnAndOnAndOnAndOnAndOnAndOn": "name_that_goes_on_and_on_and_on_and_on_and_on_and_on_and_on_and",
	} {
		got := errorClass(errtype)
		if got != want {
			t.Errorf("errorClass(%q) = %q, want %q", errtype, got, want)
		}
		if len(got) > 64 {
			t.Errorf("errorClass(%q) is %d bytes, over 64", errtype, len(got))
		}
	}
}

// Faktory's priorities keep their order as errand's, 5 being errand's
// default 0, and come back as they went.
func TestPriorityMapping(t *testing.T) {
	prev := -1 << 31
	for p := 9; p >= 1; p-- {
		e, err := errandPriority(&p)
		if err != nil {
			t.Fatal(err)
		}
		if e <= prev {
			t.Fatalf("faktory %d is errand %d, not after %d", p, e, prev)
		}
		prev = e
		if back := faktoryPriority(e); back != p {
			t.Fatalf("faktory %d comes back as %d", p, back)
		}
	}
	if e, _ := errandPriority(nil); e != 0 {
		t.Fatalf("no priority is errand %d, want 0", e)
	}
	if faktoryPriority(-100) != 9 || faktoryPriority(100) != 1 {
		t.Fatal("errand priorities beyond Faktory's range are not bounded to 1..9")
	}
}
