package main

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestUsesOnlyPublicAPI fails if any file of the example, tests included,
// imports a package under internal/: the example shows what a user of errand
// can write.
func TestUsesOnlyPublicAPI(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("found %d Go files; run the test from examples/fieldnotes", len(files))
	}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains("/"+path+"/", "/internal/") {
				t.Errorf("%s imports %s; the example may use only errand's public API", fset.Position(imp.Pos()), path)
			}
		}
	}
}
