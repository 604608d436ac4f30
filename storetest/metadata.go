package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var metadataCases = []testCase{
	{"RoundTrip", testMetadataRoundTrip},
	{"Refused", testMetadataRefused},
}

// testMetadataRoundTrip: a job's metadata comes back as written from the
// insert, a read and a claim, whether the job is inserted alone, in a
// small batch or in a large one (which a store may write another way, as
// PostgreSQL does with COPY); a job without metadata has none.
func testMetadataRoundTrip(t *testing.T, h harness) {
	e := open(t, h)
	meta := func(i int) json.RawMessage {
		if i%2 == 1 {
			return nil
		}
		return json.RawMessage(fmt.Sprintf(`{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","i":%d,"custom":{"a":[1,"x"]}}`, i))
	}
	for _, n := range []int{1, 2, 200} {
		ps := make([]*errandstore.JobInsertParams, n)
		for i := range ps {
			ps[i] = newJob(fmt.Sprintf("m%d-%d", n, i))
			ps[i].Metadata = meta(i)
		}
		inserted := e.insert(ps...)
		for i, j := range inserted {
			e.wantMetadata("inserted", j, meta(i))
			e.wantMetadata("read", e.get(j.ID), meta(i))
		}
	}
	claimed := e.claim(300)
	if len(claimed) != 203 {
		t.Fatalf("claimed %d jobs, want 203", len(claimed))
	}
	for _, j := range claimed {
		var n, i int
		if _, err := fmt.Sscanf(j.ID, "m%d-%d", &n, &i); err != nil {
			t.Fatalf("job id %q: %v", j.ID, err)
		}
		e.wantMetadata("claimed", j, meta(i))
	}
}

// wantMetadata fails the test unless j's metadata is want, as JSON.
func (e *env) wantMetadata(what string, j *errandtype.Job, want json.RawMessage) {
	e.t.Helper()
	if want == nil {
		if j.Metadata != nil {
			e.t.Errorf("%s job %s: metadata %s, want none", what, j.ID, j.Metadata)
		}
		return
	}
	if j.Metadata == nil || !sameJSON(j.Metadata, want) {
		e.t.Errorf("%s job %s: metadata %s, want %s", what, j.ID, j.Metadata, want)
	}
}

// testMetadataRefused: metadata that is not a JSON object, or too large,
// is an input error naming it, and nothing of the batch is written.
func testMetadataRefused(t *testing.T, h harness) {
	e := open(t, h)
	big := `{"k":"` + strings.Repeat("x", errandstore.MaxMetadataBytes) + `"}`
	for _, bad := range []string{`[1]`, `"x"`, `7`, `{"a":`, big} {
		ok, p := newJob("fine"), newJob("bad")
		p.Metadata = json.RawMessage(bad)
		_, err := e.s.JobInsertMany(e.ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{ok, p}})
		var ie *errandtype.InputError
		if !errors.As(err, &ie) || ie.Field != "metadata" {
			t.Errorf("metadata %.20s: err = %v, want an input error on field metadata", bad, err)
		}
		e.notFound("fine")
		e.notFound("bad")
	}
}
