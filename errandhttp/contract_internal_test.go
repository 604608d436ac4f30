package errandhttp

import (
	"database/sql"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/errandhq/errand"
	contract "github.com/errandhq/errand/api"
	"github.com/errandhq/errand/sqlite"
	"go.yaml.in/yaml/v3"
)

// contractDoc is what these tests read of api/openapi.yaml.
type contractDoc struct {
	Paths      map[string]map[string]yaml.Node
	Components struct {
		Schemas struct {
			Error struct {
				Properties struct {
					Error struct {
						Properties struct {
							Code struct {
								Enum []string
							}
						}
					}
				}
			} `yaml:"Error"`
		}
	}
}

func readContract(t *testing.T) *contractDoc {
	t.Helper()
	var d contractDoc
	if err := yaml.Unmarshal(contract.OpenAPI, &d); err != nil {
		t.Fatalf("api/openapi.yaml: %v", err)
	}
	return &d
}

// methods are the keys of a path item that name operations.
var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// TestContractNamesEveryRoute: every endpoint the API mounts is in
// api/openapi.yaml, with the same path template, and the file names no
// other.
func TestContractNamesEveryRoute(t *testing.T) {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "errand.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c, err := errand.NewClient(st, &errand.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var mounted []string
	for _, rt := range (&api[*sql.Tx]{c: c}).routes() {
		mounted = append(mounted, rt.pattern)
	}
	var documented []string
	for path, item := range readContract(t).Paths {
		for m := range item {
			if slices.Contains(methods, m) {
				documented = append(documented, strings.ToUpper(m)+" "+path)
			}
		}
	}
	for _, p := range mounted {
		if !slices.Contains(documented, p) {
			t.Errorf("%s is served but not in api/openapi.yaml: describe it there", p)
		}
	}
	for _, p := range documented {
		if !slices.Contains(mounted, p) {
			t.Errorf("%s is in api/openapi.yaml but not served: remove it, or mount it in routes()", p)
		}
	}
}

// sentCode finds the error codes the package's code sends: writeError's
// code, an httpError's, an errorBody's.
var sentCode = regexp.MustCompile(`(?:writeError\([^,\n]+,[^,\n]+,\s*|httpError\{[^,\n]+,\s*|errorBody\{Code:\s*)"([a-z_]+)"`)

// TestContractErrorCodes: the codes api/openapi.yaml lists for an error
// are those the server sends, every one of them and no other.
func TestContractErrorCodes(t *testing.T) {
	documented := readContract(t).Components.Schemas.Error.Properties.Error.Properties.Code.Enum
	if len(documented) == 0 {
		t.Fatal("api/openapi.yaml lists no error code (components.schemas.Error.properties.error.properties.code.enum)")
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	sent := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range sentCode.FindAllStringSubmatch(string(b), -1) {
			sent[m[1]] = f
		}
	}
	if len(sent) < 10 {
		t.Fatalf("found %d codes sent (%v): the pattern no longer matches how the package writes errors", len(sent), sent)
	}
	for code, f := range sent {
		if !slices.Contains(documented, code) {
			t.Errorf("error code %q, sent in %s, is not in api/openapi.yaml's list", code, f)
		}
	}
	for _, code := range documented {
		if _, ok := sent[code]; !ok {
			t.Errorf("error code %q is in api/openapi.yaml's list, but nothing sends it", code)
		}
	}
}

// TestContractPageEscapes: the API page's text is escaped, its code spans
// alone made markup.
func TestContractPageEscapes(t *testing.T) {
	got := string(codeSpans("send `<b>` & <script>x</script>"))
	if want := "send <code>&lt;b&gt;</code> &amp; &lt;script&gt;x&lt;/script&gt;"; got != want {
		t.Errorf("codeSpans = %q, want %q", got, want)
	}
}
