package errandhttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// BenchmarkAPIClaimAck measures a remote worker's round trips over HTTP on
// SQLite: claim max_jobs jobs, then acknowledge each one, or all of them
// with one POST /api/v1/ack.
func BenchmarkAPIClaimAck(b *testing.B) {
	for _, tc := range []struct {
		batch    int
		batchAck bool
	}{{1, false}, {100, false}, {100, true}} {
		batch, batchAck := tc.batch, tc.batchAck
		b.Run(fmt.Sprintf("max_jobs=%d/batch_ack=%v", batch, batchAck), func(b *testing.B) {
			s := newServer(b, openSQLite(b, nil), nil, nil)
			ps := make([]errand.EnqueueParams, b.N)
			for i := range ps {
				ps[i] = errand.EnqueueParams{Args: errand.RawArgs{KindName: "task"}}
			}
			if _, err := s.c.EnqueueMany(context.Background(), ps); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			done := 0
			for done < b.N {
				r := s.op(b, "POST", "/api/v1/queues/default/claim", map[string]any{"kinds": []string{"task"}, "max_jobs": batch})
				if r.status != http.StatusOK {
					b.Fatalf("claim: %d %s", r.status, r.body)
				}
				var claimed struct {
					Jobs []errandtype.Envelope `json:"jobs"`
				}
				if err := json.Unmarshal(r.body, &claimed); err != nil {
					b.Fatal(err)
				}
				if batchAck {
					leases := make([]map[string]string, len(claimed.Jobs))
					for i, j := range claimed.Jobs {
						leases[i] = map[string]string{"id": j.ID, "lease_token": j.LeaseToken}
					}
					if r := s.op(b, "POST", "/api/v1/ack", map[string]any{"jobs": leases}); r.status != http.StatusOK {
						b.Fatalf("ack: %d %s", r.status, r.body)
					}
				} else {
					for _, j := range claimed.Jobs {
						if r := s.op(b, "POST", "/api/v1/jobs/"+j.ID+"/ack", map[string]any{"lease_token": j.LeaseToken}); r.status != http.StatusOK {
							b.Fatalf("ack: %d %s", r.status, r.body)
						}
					}
				}
				done += len(claimed.Jobs)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}
