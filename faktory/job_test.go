package faktory

import (
	"encoding/json"
	"testing"
)

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

// A trace context among a job's custom fields is kept at the top of its
// metadata too, where errand's tracing reads it; custom comes back whole.
func TestTraceContextFromCustom(t *testing.T) {
	m := faktoryMeta{Custom: []byte(`{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","tracestate":"a=1","order":7}`)}
	b, err := m.metadata()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got["traceparent"] != "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" || got["tracestate"] != "a=1" {
		t.Fatalf("metadata %s: no trace context at the top", b)
	}
	if custom := got["faktory"].(map[string]any)["custom"].(map[string]any); custom["order"] != 7.0 || custom["traceparent"] == nil {
		t.Fatalf("metadata %s: custom not kept whole", b)
	}
	b, _ = (&faktoryMeta{Custom: []byte(`{"traceparent":7}`)}).metadata()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil || top["traceparent"] != nil {
		t.Fatalf("a trace context that is not a string was lifted: %s (%v)", b, err)
	}
}
