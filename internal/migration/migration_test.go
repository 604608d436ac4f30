package migration

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoad(t *testing.T) {
	fsys := fstest.MapFS{
		"m/002_two.sql": {Data: []byte("two")},
		"m/001_one.sql": {Data: []byte("one")},
		"m/README":      {Data: []byte("ignored")},
	}
	ms, err := Load(fsys, "m")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Version != 1 || ms[0].SQL != "one" || ms[1].Name != "002_two.sql" {
		t.Fatalf("Load = %+v", ms)
	}
}

func TestLoadAllowsGaps(t *testing.T) {
	ms, err := Load(fstest.MapFS{"m/001_a.sql": {}, "m/009_i.sql": {}, "m/003_c.sql": {}}, "m")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3 || ms[1].Version != 3 || Latest(ms) != 9 {
		t.Fatalf("Load = %+v", ms)
	}
}

func TestLoadRejects(t *testing.T) {
	for name, fsys := range map[string]fstest.MapFS{
		"unnumbered": {"m/001_a.sql": {}, "m/init.sql": {}},
		"repeat":     {"m/001_a.sql": {}, "m/001_b.sql": {}},
		"empty":      {},
	} {
		if _, err := Load(fsys, "m"); err == nil || !strings.Contains(err.Error(), "migration") {
			t.Errorf("%s: Load err = %v, want an error about the migrations", name, err)
		}
	}
}
