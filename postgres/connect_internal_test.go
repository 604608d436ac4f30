package postgres

import (
	"testing"
	"time"
)

// TestParseConfigConnectTimeout: a pool Open creates bounds every
// connection attempt, by the URL's connect_timeout or by the default.
func TestParseConfigConnectTimeout(t *testing.T) {
	for _, tt := range []struct {
		url  string
		want time.Duration
	}{
		{"postgres://u@db.example:5432/app", DefaultConnectTimeout},
		{"postgres://u@db.example:5432/app?sslmode=disable&connect_timeout=3", 3 * time.Second},
		{"postgres://u@db.example:5432/app?connect_timeout=0", DefaultConnectTimeout},
		{"host=db.example port=5432 dbname=app", DefaultConnectTimeout},
		{"host=db.example dbname=app connect_timeout=30", 30 * time.Second},
	} {
		t.Setenv("PGCONNECT_TIMEOUT", "")
		cfg, err := parseConfig(tt.url, &Options{MaxConns: 3})
		if err != nil {
			t.Errorf("parseConfig(%q): %v", tt.url, err)
			continue
		}
		if got := cfg.ConnConfig.ConnectTimeout; got != tt.want {
			t.Errorf("parseConfig(%q): connect timeout %s, want %s", tt.url, got, tt.want)
		}
		if cfg.MaxConns != 3 {
			t.Errorf("parseConfig(%q): MaxConns %d, want 3", tt.url, cfg.MaxConns)
		}
	}
	if DefaultConnectTimeout != 10*time.Second {
		t.Errorf("DefaultConnectTimeout = %s, want the documented 10s", DefaultConnectTimeout)
	}
}
