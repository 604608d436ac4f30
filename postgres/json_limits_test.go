package postgres_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestJSONRefusedExactlyAsJsonbRefusesIt holds the Client's check of JSON
// args to the server's own jsonb input: every document here is valid JSON,
// which SQLite keeps as text, and the check must refuse exactly those that
// PostgreSQL refuses, so that no job is accepted by one store and refused
// by the other, and no job, batch callback or workflow step is accepted
// here and refused later, when a worker's outcome inserts it.
func TestJSONRefusedExactlyAsJsonbRefusesIt(t *testing.T) {
	url := pgtest.URL(t)
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())

	zeros := func(n int) string { return strings.Repeat("0", n) }
	docs := []string{
		`{"a": "plain"}`,
		`{"a": "\u0000"}`, `{"a": "x\u0000y"}`, `{"a": "\\u0000"}`, `{"a": "\\\u0000"}`,
		`{"a\u0000": 1}`,
		`{"a": "\ud83d\ude00"}`, `{"a": "\uD83D\uDE00"}`,
		`{"a": "\ud800"}`, `{"a": "\udc00"}`, `{"a": "\udfff\ud800"}`, `{"a": "\ud83d x"}`,
		`{"a": "\ud83d\u0041"}`, `{"a": "\ud83d\ud83d\ude00"}`, `{"a": "\\ud800"}`,
		`{"a": "\u00e9\u20ac"}`, `["\ud800"]`, `"\udbff\udfff"`,
		`{"a": 0}`, `{"a": -0.0}`, `{"a": 1.5e3}`, `{"a": -12.250}`,
		`{"a": 1e131071}`, `{"a": 9.99e131071}`, `{"a": 1e131072}`, `{"a": -1e131072}`, `{"a": 0.1e131072}`,
		`{"a": 10e131071}`, `{"a": 1E+131071}`, `{"a": 1` + zeros(131071) + `}`, `{"a": 1` + zeros(131072) + `}`,
		`{"a": 1e-16383}`, `{"a": 1e-16384}`, `{"a": 1.5e-16383}`, `{"a": 1.0e-16383}`,
		`{"a": 0.` + zeros(16382) + `1}`, `{"a": 0.` + zeros(16383) + `1}`, `{"a": 1.` + zeros(16383) + `}`, `{"a": 1.` + zeros(16384) + `}`,
		`{"a": 1` + zeros(16383) + `e-16383}`, `{"a": 1` + zeros(16383) + `e-16384}`, `{"a": 1e-016383}`,
		`{"a": 0e999999}`, `{"a": 0e-16383}`, `{"a": 0e-16384}`, `{"a": 0.0e-16383}`,
		`{"a": 0e1073741822}`, `{"a": 0e1073741823}`, `{"a": 1e-1073741822}`, `{"a": 0e99999999999999999999}`,
		`{"a": 1e200000}`, `{"a": 1e-200000}`,
		`[1, "\ud800", 2]`, `{"a": [1e131072]}`, `{"s": "1e999999", "n": 1}`,
	}
	for _, doc := range docs {
		if !json.Valid([]byte(doc)) {
			t.Fatalf("%.60s is not valid JSON; the test is for valid JSON", doc)
		}
		_, pgErr := conn.Exec(t.Context(), `SELECT $1::text::jsonb`, doc)
		p := job("j")
		p.Args = json.RawMessage(doc)
		err := p.Validate()
		var ie *errandtype.InputError
		if err != nil && !errors.As(err, &ie) {
			t.Fatalf("Validate(%.60s) = %v; want nil or an *InputError", doc, err)
		}
		if (err == nil) != (pgErr == nil) {
			t.Errorf("args %.60s: the Client says %v; PostgreSQL's jsonb says %v", doc, err, pgErr)
		}
	}
}
