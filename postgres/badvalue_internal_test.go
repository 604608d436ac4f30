package postgres

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/errandhq/errand/errandtype"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestBadValueIsInputError: PostgreSQL's refusals of a value (data
// exceptions, and program limits a value exceeds) are bad input, not an
// outage to retry; other errors pass unchanged.
func TestBadValueIsInputError(t *testing.T) {
	for code, want := range map[string]bool{
		"22P05": true,  // untranslatable character (a NUL byte)
		"22003": true,  // numeric value out of range
		"54000": true,  // program limit exceeded (a jsonb too large)
		"40001": false, // serialization failure: try again
		"57P01": false, // admin shutdown: an outage
		"23505": false, // unique violation: the caller's to read
	} {
		err := fmt.Errorf("insert jobs: %w", &pgconn.PgError{Code: code, Message: "m"})
		var ie *errandtype.InputError
		if got := errors.As(badValue(err), &ie); got != want {
			t.Errorf("badValue(SQLSTATE %s) is an InputError: %v, want %v", code, got, want)
		}
	}
	if err := badValue(io.ErrUnexpectedEOF); err != io.ErrUnexpectedEOF {
		t.Errorf("badValue(%v) = %v, want it unchanged", io.ErrUnexpectedEOF, err)
	}
}
