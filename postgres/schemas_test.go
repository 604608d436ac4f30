package postgres_test

import (
	"os"
	"testing"

	"github.com/errandhq/errand/internal/pgschemas"
	"github.com/errandhq/errand/postgres/pgtest"
)

func TestMain(m *testing.M) {
	pgtest.AnnounceSkip()
	code := m.Run()
	pgschemas.Close()
	os.Exit(code)
}
