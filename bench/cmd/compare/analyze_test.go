package main

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestAnalyze checks that the analyze of errand's and River's clients, run
// by the measures on analyzed tables, has PostgreSQL take the statistics of
// their job tables.
func TestAnalyze(t *testing.T) {
	ctx := context.Background()
	url := testPostgresURL(t)
	var schemas []string
	e := &env{store: "postgres", url: url, workers: 10, created: func(s string) { schemas = append(schemas, s) }}
	analyzed := func(table string) bool {
		t.Helper()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_user_tables
			WHERE schemaname = $1 AND relname = $2 AND last_analyze IS NOT NULL`, schemas[len(schemas)-1], table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	var before, after bool
	if _, err := withErrand(ctx, e, nil, func(c errandClient) (result, error) {
		before = analyzed("errand_jobs")
		err := c.analyze(ctx)
		after = analyzed("errand_jobs")
		return result{}, err
	}); err != nil {
		t.Fatal(err)
	}
	if before || !after {
		t.Errorf("errand_jobs analyzed before the analyze %v, after it %v", before, after)
	}
	if _, err := withRiver(ctx, e, nil, func(c riverClient) (result, error) {
		before = analyzed("river_job")
		err := c.analyze(ctx)
		after = analyzed("river_job")
		return result{}, err
	}); err != nil {
		t.Fatal(err)
	}
	if before || !after {
		t.Errorf("river_job analyzed before the analyze %v, after it %v", before, after)
	}
}

// testPostgresURL is the PostgreSQL the tests use (ERRAND_TEST_POSTGRES_URL,
// or compare's default); it skips the test when none answers there.
func testPostgresURL(t *testing.T) string {
	t.Helper()
	url := os.Getenv("ERRAND_TEST_POSTGRES_URL")
	if url == "" {
		url = defaultPostgresURL
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Skipf("no PostgreSQL at %s (set ERRAND_TEST_POSTGRES_URL): %v", url, err)
	}
	conn.Close(context.Background())
	return url
}
