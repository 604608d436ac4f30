package errand_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s:]+)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	// A page named in text: a path with a folder, or a name in
	// capitals such as README.md.
	goDocRef = regexp.MustCompile(`\b(?:[\w.-]+/)+[\w.-]+\.md\b|\b[A-Z][A-Z_]*\.md\b`)
)

// TestDocsLinksResolve fails when a page of the repository links to a file
// or heading that is not there, or a page or a Go comment names a page the
// repository does not hold, so that a reader never follows a reference to
// nothing.
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("git", "ls-files").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (the check reads the files git tracks)", err)
	}
	files := strings.Fields(string(out))
	for _, f := range files {
		switch filepath.Ext(f) {
		case ".md":
			checkPageLinks(t, f)
			fallthrough
		case ".go":
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, ref := range goDocRef.FindAllString(string(b), -1) {
				if !exists(ref) && !exists(filepath.Join(filepath.Dir(f), ref)) {
					t.Errorf("%s names %s, which the repository does not hold", f, ref)
				}
			}
		}
	}
}

func checkPageLinks(t *testing.T, page string) {
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
		target, anchor, _ := strings.Cut(m[1], "#")
		if target == "" {
			target = page
		} else {
			target = filepath.Join(filepath.Dir(page), target)
			if !strings.ContainsAny(m[1], "./") {
				continue // code such as Checkpoint[T](job), not a link
			}
		}
		if !exists(target) {
			t.Errorf("%s links to %s, which is not there", page, m[1])
			continue
		}
		if anchor != "" && filepath.Ext(target) == ".md" && !hasHeading(t, target, anchor) {
			t.Errorf("%s links to %s, whose page has no such heading", page, m[1])
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// hasHeading reports whether page has a heading whose anchor, as GitHub
// makes it, is anchor.
func hasHeading(t *testing.T, page, anchor string) bool {
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mdHeading.FindAllStringSubmatch(string(b), -1) {
		var slug strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(m[1])) {
			switch {
			case r == ' ':
				slug.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				slug.WriteRune(r)
			}
		}
		if slug.String() == anchor {
			return true
		}
	}
	return false
}
