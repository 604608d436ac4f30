package errand_test

import (
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// TestValuesPastWhatAStoreKeepsAreRefusedAlike: times and numbers one
// store would keep, or compare with, and the other refuses with an error
// of its own are refused by both as bad input, and nothing is written.
func TestValuesPastWhatAStoreKeepsAreRefusedAlike(t *testing.T) {
	eachJobStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := t.Context()
		c := newClient(t, st, &errand.Config{Clock: clock})
		wantInput := func(what string, err error) {
			t.Helper()
			var ie *errandtype.InputError
			if !errors.As(err, &ie) {
				t.Errorf("%s: %v; want an *InputError", what, err)
			}
		}
		far := time.Date(-5000, 1, 1, 0, 0, 0, 0, time.UTC)
		_, err := c.Audit(ctx, &errand.AuditOpts{Since: far})
		wantInput("Audit since the year -5000", err)
		_, err = c.Audit(ctx, &errand.AuditOpts{Until: time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC)})
		wantInput("Audit until the year 12000", err)
		_, err = st.AuditList(ctx, &errandstore.AuditListParams{Since: far})
		wantInput("the store's AuditList since the year -5000", err)

		_, err = st.WorkerRegister(ctx, &errandstore.WorkerRegisterParams{ID: "w1", Host: "h", PID: 1 << 31, HeartbeatInterval: time.Second})
		wantInput("WorkerRegister with pid 2^31", err)
		if _, err := st.WorkerRegister(ctx, &errandstore.WorkerRegisterParams{ID: "w2", Host: "h", PID: 1, HeartbeatInterval: time.Second}); err != nil {
			t.Fatal(err)
		}
		_, err = st.WorkerHeartbeat(ctx, &errandstore.WorkerHeartbeatParams{ID: "w2", Stats: errandstore.WorkerStats{JobsRunning: 1 << 31}})
		wantInput("WorkerHeartbeat with 2^31 jobs running", err)
		ws, err := st.WorkerList(ctx, &errandstore.WorkerListParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) != 1 || ws[0].ID != "w2" || ws[0].JobsRunning != 0 {
			t.Fatalf("workers after refused calls: %+v; want w2 alone, with no jobs running", ws)
		}
	})
}
