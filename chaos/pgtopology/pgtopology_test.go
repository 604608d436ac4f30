package pgtopology_test

import (
	"context"
	"testing"

	"github.com/errandhq/errand/chaos/pgtopology"
	"github.com/jackc/pgx/v5"
)

// TestFailover makes a synchronous pair, commits a row, kills the primary,
// promotes the standby, and finds the row there, writable.
func TestFailover(t *testing.T) {
	if err := pgtopology.Available(); err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	top, err := pgtopology.Start(ctx, pgtopology.Sync)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := top.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	exec := func(url, sql string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec(top.URL, "CREATE TABLE t (x int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if err := exec(top.StandbyURL, "INSERT INTO t VALUES (2)"); err == nil {
		t.Fatal("the standby accepted a write before its promotion")
	}
	if err := top.KillPrimary(ctx); err != nil {
		t.Fatal(err)
	}
	if err := top.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := top.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st["PRIMARY_ROLE"] != "down" || st["STANDBY_ROLE"] != "primary" {
		t.Fatalf("after failover: primary %s, standby %s; want down and primary", st["PRIMARY_ROLE"], st["STANDBY_ROLE"])
	}
	if err := exec(top.URL, "INSERT INTO t VALUES (2)"); err != nil {
		t.Fatalf("the multi-host URL finds no writable server after promotion: %v", err)
	}
	conn, err := pgx.Connect(ctx, top.StandbyURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 2 {
		t.Fatalf("promoted standby has %d rows (%v); want 2", n, err)
	}
}

// TestSingleRestart makes a primary alone, commits a row, crashes and
// restarts it, and finds the row; the server runs at PostgreSQL's defaults.
func TestSingleRestart(t *testing.T) {
	if err := pgtopology.Available(); err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	top, err := pgtopology.Start(ctx, pgtopology.Single)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := top.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	if top.URL != top.PrimaryURL || top.StandbyPort != 0 || top.StandbyURL != "" {
		t.Fatalf("single: URL %q, primary %q, standby port %d, standby URL %q; want the primary's URL and no standby",
			top.URL, top.PrimaryURL, top.StandbyPort, top.StandbyURL)
	}
	conn, err := pgx.Connect(ctx, top.URL)
	if err != nil {
		t.Fatal(err)
	}
	var av string
	if err := conn.QueryRow(ctx, "SHOW autovacuum").Scan(&av); err != nil || av != "on" {
		t.Errorf("autovacuum = %q (%v); want on, PostgreSQL's default", av, err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE t (x int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if err := top.RestartPrimary(ctx); err != nil {
		t.Fatal(err)
	}
	if err := conn.Ping(ctx); err == nil {
		t.Error("a connection from before the restart still works: the server did not restart")
	}
	conn.Close(ctx)
	conn, err = pgx.Connect(ctx, top.URL)
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 1 {
		t.Fatalf("after restart: %d rows (%v); want 1", n, err)
	}
	st, err := top.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st["PRIMARY_ROLE"] != "primary" || st["STANDBY_ROLE"] != "" {
		t.Fatalf("status: primary %q, standby %q; want primary and none", st["PRIMARY_ROLE"], st["STANDBY_ROLE"])
	}
}
