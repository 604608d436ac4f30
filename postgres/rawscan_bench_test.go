package postgres

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// BenchmarkDecodeJobRow decodes one claimed row, with every nullable
// column set, from its wire values: the claim's per-row cost in Go, free
// of the database's noise.
func BenchmarkDecodeJobRow(b *testing.B) {
	ctx := b.Context()
	s := openTestStore(b)
	p := &errandstore.JobInsertParams{ID: "full", Queue: "q", Kind: "k", Args: json.RawMessage(`{"a":1}`), ArgsVersion: 2,
		Priority: -3, MaxAttempts: 7, BackoffBase: 2 * time.Second, BackoffMax: time.Minute, MaxAge: time.Hour,
		UniqueKey: "u", UniqueScope: errandtype.UniqueUntilFinished, UniqueWindow: time.Hour,
		OrderingKey: "o", OrderingHold: true, FairnessKey: "f", Tags: []string{"x", "y"}}
	if _, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{p}}); err != nil {
		b.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, s.sql(`UPDATE {jobs} SET state = 'running', attempt = 1,
			lease_token = 'token', lease_until = now(), lease_owner = 'worker', attempted_at = now()`)); err != nil {
		b.Fatal(err)
	}
	rs, err := s.pool.Query(ctx, s.sql(`SELECT `+jobColumns+` FROM {jobs}`))
	if err != nil {
		b.Fatal(err)
	}
	var vals [][]byte
	for rs.Next() {
		for _, v := range rs.RawValues() {
			if v != nil {
				v = append([]byte{}, v...)
			}
			vals = append(vals, v)
		}
	}
	rs.Close()
	if err := rs.Err(); err != nil || !decodable(rs.FieldDescriptions()) {
		b.Fatalf("the row is not decodable: %v", err)
	}
	var text []byte
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeJobRow(vals, &text); err != nil {
			b.Fatal(err)
		}
	}
}
