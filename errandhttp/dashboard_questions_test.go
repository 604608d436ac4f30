package errandhttp

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/errandhq/errand/errandtest"
)

// TestFlowControlQuestionsAnswered: every place docs/dashboard.md's "Flow
// control at a glance" names is there: each dashboard path it gives
// answers, and each overview section it names is one.
func TestFlowControlQuestionsAnswered(t *testing.T) {
	doc, err := os.ReadFile("../docs/dashboard.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "## Flow control at a glance")
	table, _, _ = strings.Cut(table, "\n\n`")
	if !ok || strings.Count(table, "\n|") < 8 {
		t.Fatalf("docs/dashboard.md has no question table under \"Flow control at a glance\"")
	}
	overview, err := os.ReadFile("dashboard/templates/overview.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`Overview, \*([^*]+)\*`).FindAllStringSubmatch(table, -1) {
		if !strings.Contains(string(overview), "<h2>"+m[1]+"</h2>") {
			t.Errorf("the table names an overview section %q the overview lacks", m[1])
		}
	}
	h := NewDashboard(newSQLiteClient(t, errandtest.NewClock(testStart)), nil)
	paths := regexp.MustCompile("`(/[^` ]*)`").FindAllStringSubmatch(table, -1)
	if len(paths) < 5 {
		t.Fatalf("the table gives %d paths; want the pages it names", len(paths))
	}
	for _, m := range paths {
		mustGet(t, h, m[1])
	}
}
