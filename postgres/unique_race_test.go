package postgres_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// afterInsert runs hook once, when armed, right after the next statement
// that inserts ends (a lone enqueue's may be a WITH around its INSERT): between a unique enqueue's INSERT and its look-up of the
// key's holder.
type afterInsert struct {
	armed atomic.Bool
	hook  func()
}

type traceSQLKey struct{}

func (a *afterInsert) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, traceSQLKey{}, d.SQL)
}

func (a *afterInsert) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if q, _ := ctx.Value(traceSQLKey{}).(string); strings.Contains(q, "INSERT INTO") && a.armed.CompareAndSwap(true, false) {
		a.hook()
	}
}

// TestUniqueHolderFinishesDuringEnqueue: a unique enqueue whose key's
// holder finishes between the INSERT that met it and the look-up of the
// holder inserts the job, now that the key is free, instead of failing
// with an error about a snapshot the caller never took.
func TestUniqueHolderFinishesDuringEnqueue(t *testing.T) {
	ctx := t.Context()
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	tr := &afterInsert{}
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st, err := postgres.New(ctx, pool, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	c, err := errand.NewClient(st, &errand.Config{})
	if err != nil {
		t.Fatal(err)
	}
	uo := &errand.UniqueOpts{Key: "sync:acct-7", Scope: errandtype.UniqueUntilFinished}
	first, err := c.Enqueue(ctx, errand.RawArgs{KindName: "sync"}, &errand.EnqueueOpts{Unique: uo})
	if err != nil {
		t.Fatal(err)
	}
	other, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	tr.hook = func() { // the holder succeeds, as its acknowledgment would make it
		if _, err := other.Exec(context.Background(), `UPDATE `+pgx.Identifier{schema, "errand_jobs"}.Sanitize()+
			` SET state = 'succeeded', finished_at = now() WHERE id = $1`, first.Job.ID); err != nil {
			t.Error(err)
		}
	}
	tr.armed.Store(true)
	res, err := c.Enqueue(ctx, errand.RawArgs{KindName: "sync"}, &errand.EnqueueOpts{Unique: uo})
	if err != nil {
		t.Fatalf("enqueue while the key's holder finishes: %v", err)
	}
	if tr.armed.Load() {
		t.Fatal("the holder was not finished between the statements; the test proves nothing")
	}
	if res.Duplicate || res.Job.ID == first.Job.ID || res.Job.State != errandtype.StateQueued {
		t.Fatalf("enqueue = duplicate %v, job %s %s; want a new queued job, the key being free", res.Duplicate, res.Job.ID, res.Job.State)
	}
}
