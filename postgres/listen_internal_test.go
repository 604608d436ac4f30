package postgres

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TestListenAttemptTimeout: an attempt to reconnect the listener has the
// connect timeout for every server of the URL, so that a first server that
// never answers (a dead primary) leaves time to reach the next, and as much
// again for the probe's notification through the pool.
func TestListenAttemptTimeout(t *testing.T) {
	t.Setenv("PGCONNECT_TIMEOUT", "")
	for _, tt := range []struct {
		url  string
		want time.Duration
	}{
		{"postgres://u@db1:5432/app", DefaultConnectTimeout},
		{"postgres://u@db1:5432,db2:5432/app?target_session_attrs=read-write", 2 * DefaultConnectTimeout},
		// sslmode prefer (the default) tries each server twice; it counts once.
		{"postgres://u@db1:5432,db2:5432,db3:5433/app?sslmode=prefer&connect_timeout=2", 6 * time.Second},
	} {
		cfg, err := parseConfig(tt.url, nil)
		if err != nil {
			t.Fatalf("parseConfig(%q): %v", tt.url, err)
		}
		if got := connectBound(&cfg.ConnConfig.Config); got != tt.want {
			t.Errorf("%s: connect bound %s, want %s", tt.url, got, tt.want)
		}
		pool, err := pgxpool.NewWithConfig(t.Context(), cfg) // connects lazily
		if err != nil {
			t.Fatal(err)
		}
		s := &Store{pool: db{pool}}
		if got, want := s.listenAttemptTimeout(), 2*tt.want+listenProbeTimeout; got != want {
			t.Errorf("%s: listener attempt bound %s, want %s", tt.url, got, want)
		}
		pool.Close()
	}
	cfg, err := parseConfig("postgres://u@db1:5432,db2:5432/app", nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.ConnectTimeout = 0 // a pool of the caller's, without one
	if got, want := connectBound(&cfg.ConnConfig.Config), 2*listenConnectTimeout; got != want {
		t.Errorf("without a connect timeout: connect bound %s, want %s", got, want)
	}
}
