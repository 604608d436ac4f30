package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/errandhq/errand/errandtype"
	"github.com/jackc/pgx/v5/pgconn"
)

// unsent is an error of a statement none of which reached the server.
type unsent struct{}

func (unsent) Error() string     { return "write failed: connection reset" }
func (unsent) SafeToRetry() bool { return true }
func (unsent) Unwrap() error     { return io.ErrUnexpectedEOF }

// TestRetrySendsAgainOnlyWhatWasNotSent: a statement none of which was
// sent is sent once more; one that reached the server (a FATAL answer, a
// read that failed) is not, and is reported as errandtype.ErrStoreUnavailable;
// nor is one whose caller gave up, nor one that failed twice. A refused
// login is no lost connection.
func TestRetrySendsAgainOnlyWhatWasNotSent(t *testing.T) {
	fatal := &pgconn.PgError{Severity: "FATAL", Code: "57P01", Message: "terminating connection due to administrator command"}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	for _, c := range []struct {
		name        string
		ctx         context.Context
		errs        []error
		sends       int
		unavailable bool
	}{
		{"unsent, then sent", t.Context(), []error{unsent{}, nil}, 2, false},
		{"unsent twice", t.Context(), []error{unsent{}, unsent{}}, 2, true},
		{"terminated mid-statement", t.Context(), []error{fatal, nil}, 1, true},
		{"read failed", t.Context(), []error{io.ErrUnexpectedEOF, nil}, 1, true},
		{"caller gave up", cancelled, []error{unsent{}, nil}, 1, false},
		{"not a connection's error", t.Context(), []error{errors.New("syntax error"), nil}, 1, false},
		// A setting to fix, though the server ends the session.
		{"password refused", t.Context(), []error{&pgconn.PgError{Severity: "FATAL", Code: "28P01"}, nil}, 1, false},
		{"no such database", t.Context(), []error{&pgconn.PgError{Severity: "FATAL", Code: "3D000"}, nil}, 1, false},
	} {
		sends := 0
		_, err := retry(c.ctx, func() (int, error) {
			sends++
			return 0, c.errs[sends-1]
		})
		if sends != c.sends || errors.Is(err, errandtype.ErrStoreUnavailable) != c.unavailable {
			t.Errorf("%s: sent %d times, err %v; want %d sends, unavailable %v", c.name, sends, err, c.sends, c.unavailable)
		}
	}
}

// TestPoolerHint checks that the errors a transaction pooler makes of named
// prepared statements say what to change, and that others are left alone.
func TestPoolerHint(t *testing.T) {
	for code, hinted := range map[string]bool{"42P05": true, "26000": true, "42P01": false} {
		err := poolerHint(fmt.Errorf("migrate: %w", &pgconn.PgError{Code: code, Message: "prepared statement"}))
		if got := strings.Contains(err.Error(), "default_query_exec_mode=cache_describe"); got != hinted {
			t.Errorf("SQLSTATE %s: %v; hint %v, want %v", code, err, got, hinted)
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != code {
			t.Errorf("SQLSTATE %s: the hint hides the server's error: %v", code, err)
		}
	}
}
