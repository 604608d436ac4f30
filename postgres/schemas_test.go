package postgres_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
)

func TestMain(m *testing.M) {
	pgtest.AnnounceSkip()
	code := m.Run()
	migrated.close()
	os.Exit(code)
}

// migrated hands the conformance cases their schemas. Migrating a new
// schema takes about a quarter of a second here (the server syncs each new
// index's file to disk), most of what a case takes, and three suites run
// some 350 cases each; so a few schemas are migrated ahead, side by side.
// Each case still gets a schema of its own, dropped when it ends.
var migrated schemaPool

// schemasAhead is how many schemas are migrated at once, ahead of the
// cases: two to four in parallel migrated one every 0.10–0.14 s, one
// alone every 0.25 s.
const schemasAhead = 3

type schemaPool struct {
	once  sync.Once
	url   string
	ready chan readySchema
	stop  chan struct{}
	wg    sync.WaitGroup
}

// readySchema is a migrated schema, or why migrating it failed.
type readySchema struct {
	name string
	err  error
}

// take returns a migrated schema of t's own on the database url, dropped
// when t ends.
func (p *schemaPool) take(t *testing.T, url string) string {
	t.Helper()
	p.once.Do(func() { p.start(url) })
	if url != p.url {
		t.Fatalf("schemas are migrated ahead on %s, not %s", p.url, url)
	}
	select {
	case r := <-p.ready:
		pgtest.DropAtEnd(t, url, r.name)
		if r.err != nil {
			t.Fatalf("migrate schema %s: %v", r.name, r.err)
		}
		return r.name
	case <-t.Context().Done():
		t.Fatal("no migrated schema before the test ended")
		return ""
	}
}

func (p *schemaPool) start(url string) {
	p.url = url
	p.ready = make(chan readySchema) // each migrator holds its schema until a case takes it
	p.stop = make(chan struct{})
	for range schemasAhead {
		p.wg.Go(p.migrate)
	}
}

// migrate migrates new schemas, one at a time, until the pool closes.
func (p *schemaPool) migrate() {
	for {
		r := readySchema{name: pgtest.Name()}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		s, err := postgres.Open(ctx, p.url, &postgres.Options{Schema: r.name, MaxConns: 1})
		if err == nil {
			s.Close()
		}
		r.err = err
		select {
		case p.ready <- r:
			cancel()
		case <-p.stop:
			if err := pgtest.Drop(ctx, p.url, r.name); err != nil {
				fmt.Fprintf(os.Stderr, "postgres tests: drop schema %s: %v\n", r.name, err)
			}
			cancel()
			return
		}
	}
}

// close stops the migrators and drops the schemas no case took.
func (p *schemaPool) close() {
	if p.stop == nil {
		return
	}
	close(p.stop)
	p.wg.Wait()
}
