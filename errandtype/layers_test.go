package errandtype_test

import (
	"go/build"
	"os"
	"path/filepath"
	"testing"
)

// TestLowLevelPackagesDoNotImportTheRoot pins errand's layers: the shared
// types (errandtype), the storage contract (errandstore) and the helpers
// under internal/ never import the root package, so that the root can
// import them all. A piece that needs the root belongs in the root, in
// errandhttp, or under cmd/errand/internal when only the binary uses it.
func TestLowLevelPackagesDoNotImportTheRoot(t *testing.T) {
	const root = "github.com/errandhq/errand"
	dirs := []string{".", "../errandstore"}
	internal, err := os.ReadDir("../internal")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range internal {
		if d.IsDir() {
			dirs = append(dirs, filepath.Join("../internal", d.Name()))
		}
	}
	if len(dirs) < 5 {
		t.Fatalf("found %d packages to check; run the test from errandtype", len(dirs))
	}
	for _, dir := range dirs {
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		for _, imp := range pkg.Imports {
			if imp == root {
				t.Errorf("%s imports %s; move what it needs of the root into errandtype or errandstore, or the code out of the low layers", dir, root)
			}
		}
	}
}
