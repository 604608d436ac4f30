package postgres

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/jackc/pgx/v5"
)

// TestClaimedJobsDecodeAsScanned: the claim's decoder of raw values reads
// every column as pgx's Scan does, for a job with every nullable column
// set and for one with none, and the text-format results it cannot read
// fall back to Scan with the same jobs.
func TestClaimedJobsDecodeAsScanned(t *testing.T) {
	ctx := t.Context()
	s := openTestStore(t)
	params := []*errandstore.JobInsertParams{
		{ID: "bare", Queue: "q", Kind: "k", Args: json.RawMessage(`{"a":1}`), ArgsVersion: 1, MaxAttempts: 3},
		{ID: "full", Queue: "q", Kind: "k", Args: json.RawMessage(`{"é":"ü"}`), ArgsVersion: 2, Priority: -3, MaxAttempts: 7,
			BackoffBase: 2 * time.Second, BackoffMax: time.Minute, MaxAge: time.Hour,
			UniqueKey: "u", UniqueScope: errandtype.UniqueUntilFinished, UniqueWindow: time.Hour,
			OrderingKey: "o", OrderingHold: true, FairnessKey: "f", Tags: []string{"x", "y"}},
	}
	if _, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: params}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC)
	lastErr, _ := json.Marshal(errandtype.LastError{Class: "boom", Message: "it broke", At: at})
	history, _ := json.Marshal([]errandtype.AttemptError{{Attempt: 1, Replay: 1, At: at, Class: "boom", Message: "it broke", Stack: "main.go:1"}})
	if _, err := s.pool.Exec(ctx, s.sql(`UPDATE {jobs} SET state = 'running', attempt = 2, replays = 1,
			lease_token = 'token', lease_until = $1, lease_owner = 'worker', attempted_at = $1, finished_at = $1,
			cancel_requested_at = $1, progress = '{"done": 5}', last_error = $2, errors = $3,
			batch_id = 'batch', workflow_id = 'flow', output = '{"out": true}'
		WHERE id = 'full'`), at, string(lastErr), string(history)); err != nil {
		t.Fatal(err)
	}
	query := s.sql(`SELECT ` + jobColumns + ` FROM {jobs} ORDER BY seq`)
	rs, err := s.pool.Query(ctx, query)
	if err != nil {
		t.Fatal(err)
	}
	if !decodable(rs.FieldDescriptions()) {
		rs.Close()
		t.Fatal("the columns of jobColumns are not decodable: the claim would always fall back to Scan")
	}
	decoded, err := scanClaimedJobs(rs)
	if err != nil {
		t.Fatal(err)
	}
	rs, err = s.pool.Query(ctx, query)
	if err != nil {
		t.Fatal(err)
	}
	scanned, err := scanJobs(rs, jobScanner())
	if err != nil {
		t.Fatal(err)
	}
	if len(decoded) != 2 || !reflect.DeepEqual(decoded, scanned) {
		t.Fatalf("decoded jobs differ from scanned ones:\n decoded %s\n scanned %s", dump(decoded), dump(scanned))
	}
	full := decoded[1]
	if full.Output == nil || full.Deadline == nil || full.UniqueWindowStart == nil || full.CancelRequestedAt == nil ||
		len(full.Errors) != 1 || full.LastError == nil || !full.OrderingHold || *full.LeaseUntil != at {
		t.Errorf("the full job lost columns: %s", dump(decoded[1:]))
	}

	// In the text format (the simple protocol) the decoder steps aside.
	rs, err = s.pool.Query(ctx, query, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	if decodable(rs.FieldDescriptions()) {
		t.Error("text-format timestamps were taken for decodable")
	}
	viaText, err := scanClaimedJobs(rs)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(viaText, scanned) {
		t.Errorf("text-format jobs differ:\n got  %s\n want %s", dump(viaText), dump(scanned))
	}
}

// TestDecodeJobRowRefusesBadValues: a NULL where the table allows none, or
// a value of the wrong width, is an error, not a zero.
func TestDecodeJobRowRefusesBadValues(t *testing.T) {
	good := make([][]byte, len(jobColumnTypes))
	for i, oid := range jobColumnTypes {
		switch oid {
		case 20, 1184: // int8, timestamptz
			good[i] = make([]byte, 8)
		case 23:
			good[i] = make([]byte, 4)
		case 21:
			good[i] = make([]byte, 2)
		default:
			good[i] = []byte("[]")
		}
	}
	good[19], good[23], good[34] = nil, nil, nil // progress, last_error, output: NULL
	var scratch []byte
	if _, err := decodeJobRow(good, &scratch); err != nil {
		t.Fatalf("a well-formed row: %v", err)
	}
	for _, c := range []struct {
		name string
		col  int
		val  []byte
	}{
		{"NULL id", 1, nil},
		{"NULL attempt", 8, nil},
		{"short seq", 0, []byte{1, 2, 3}},
		{"NULL available_at", 12, nil},
	} {
		row := append([][]byte(nil), good...)
		row[c.col] = c.val
		if _, err := decodeJobRow(row, &scratch); err == nil {
			t.Errorf("%s: decoded without an error", c.name)
		} else if c.val == nil && !errors.Is(err, errRawNull) {
			t.Errorf("%s: %v, want %v", c.name, err, errRawNull)
		}
	}
}

func dump(jobs []*errandtype.Job) string {
	b, _ := json.Marshal(jobs)
	return string(b)
}
