package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/ncruces/go-sqlite3"
)

// TestClaimNotReplanned: the writer plans a claim once. SQLite otherwise
// prepares it again at each run whose bound values differ from the last
// (each claim's time does), to weigh partial indexes against them: 0.25 ms
// of the 0.4 ms a claim of one job took.
func TestClaimNotReplanned(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "errand.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := s.db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		c := dc.(interface{ Raw() *sqlite3.Conn }).Raw()
		st, _, err := c.Prepare(claimSQL(1, 0, 0))
		if err != nil {
			return err
		}
		defer st.Close()
		for now := range int64(3) {
			st.BindInt64(1, now)
			st.BindInt64(2, now+60e6)
			st.BindText(3, "owner")
			st.BindInt64(4, now)
			st.BindText(5, "default")
			st.BindInt64(6, 10)
			for st.Step() {
			}
			if err := st.Reset(); err != nil {
				return err
			}
		}
		if n := st.Status(sqlite3.STMTSTATUS_REPREPARE, false); n != 0 {
			t.Errorf("the claim was prepared again %d times in 3 runs, want 0", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
