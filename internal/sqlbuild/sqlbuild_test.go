package sqlbuild

import (
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var (
	sqlite   = Dialect{Mark: "?", Table: func(n string) string { return "errand_" + n }, Time: func(t time.Time) any { return t.UnixMicro() }}
	postgres = Dialect{Mark: "$", Table: func(n string) string { return "{" + n + "}" }, Time: func(t time.Time) any { return t }}
)

func TestBatchList(t *testing.T) {
	tests := []struct {
		d      Dialect
		state  errandtype.BatchState
		before bool
		want   string
	}{
		{sqlite, "", false, `SELECT c FROM errand_batches ORDER BY created_at DESC, id DESC LIMIT ?1`},
		{postgres, errandtype.BatchOpen, true, `SELECT c FROM {batches} WHERE completed_at IS NULL AND (created_at, id) < ($2, $3) ORDER BY created_at DESC, id DESC LIMIT $1`},
	}
	for _, tt := range tests {
		if got := tt.d.BatchList("c", tt.state, tt.before); got != tt.want {
			t.Errorf("BatchList(%q, %v) = %s, want %s", tt.state, tt.before, got, tt.want)
		}
	}
	at := time.Unix(5, 0)
	args := sqlite.BatchListArgs(&errandstore.BatchListParams{Before: &errandtype.ListCursor{CreatedAt: at, ID: "b"}})
	if len(args) != 3 || args[0] != 100 || args[1] != at.UnixMicro() || args[2] != "b" {
		t.Errorf("BatchListArgs = %v, want [100 %d b]", args, at.UnixMicro())
	}
}

// The parameters a bulk replay's filter numbers must match its arguments,
// the first and the last being the ones a store moves on between pages.
func TestReplayMany(t *testing.T) {
	p := &errandstore.JobReplayManyParams{AfterSeq: 7, Limit: 50,
		Filter: errandstore.DeadFilter{Kind: "k", Class: "c", DiedUntil: time.Unix(9, 0)}}
	q, args := postgres.ReplayMany(p, "held", "class_of")
	want := ` FROM {jobs} WHERE state = 'dead' AND finished_at IS NOT NULL AND NOT held AND seq > $1 AND kind = $2 AND class_of = $3 AND finished_at < $4 ORDER BY seq LIMIT $5`
	if q != want {
		t.Errorf("ReplayMany = %s, want %s", q, want)
	}
	if len(args) != 5 || args[0] != int64(7) || args[4] != 50 {
		t.Errorf("args = %v, want the seq first and the limit last", args)
	}
	p.Held = true
	if q, _ := sqlite.ReplayMany(p, "held", "x"); !strings.Contains(q, "AND held AND seq > ?1") || !strings.HasSuffix(q, "LIMIT ?5") {
		t.Errorf("held ReplayMany = %s", q)
	}
}
