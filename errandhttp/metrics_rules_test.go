package errandhttp_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandhttp"
)

// rulesDir holds the example alert rules and their promtool tests.
const rulesDir = "../deploy/prometheus"

// metricName finds metric names in a rule file: errand_..., but not the
// errand_... inside a recording rule's name (queue:errand_dead_jobs:max).
var metricName = regexp.MustCompile(`(?:^|[^:A-Za-z0-9_])(errand_[a-z0-9_]+)`)

// Every metric the example alert rules use is one /metrics serves, so that
// renaming a metric without its rules (or the reverse) fails here.
func TestAlertRulesUseServedMetrics(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(rulesDir, "errand-alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		for _, m := range metricName.FindAllStringSubmatch(line, -1) {
			used[m[1]] = true
		}
	}
	if len(used) < 4 {
		t.Fatalf("found only %v in the rules; is the pattern right?", used)
	}

	// Serve every metric: a job of each outcome the rules look at, on a
	// client whose observer the handler reads.
	e := sqliteEnv(t)
	obs := errandhttp.NewMetricsObserver()
	c := e.client(t, obs)
	enqueue(t, c, "ok", nil)
	enqueue(t, c, "fail", nil)
	enqueue(t, c, "idle", nil)
	workOne(t, c, errand.DefaultQueue, errand.ResultSucceeded)
	workOne(t, c, errand.DefaultQueue, errand.ResultDead)
	fams := scrape(t, errandhttp.NewMetrics(c, &errandhttp.MetricsOptions{Observer: obs, Clock: e.clock}))

	for name := range used {
		family := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && fams[base] != nil {
				family = base
			}
		}
		if fams[family] == nil {
			served := make([]string, 0, len(fams))
			for n := range fams {
				if strings.HasPrefix(n, "errand_") {
					served = append(served, n)
				}
			}
			slices.Sort(served)
			t.Errorf("the alert rules use %s, which /metrics does not serve (it serves %s)", name, strings.Join(served, ", "))
		}
	}
}

// promtool checks the example alert rules and runs their unit tests. CI
// installs promtool; elsewhere the test skips.
func TestAlertRulesPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not on PATH; install it (Debian: apt-get install prometheus) to check deploy/prometheus/errand-alerts.yml")
	}
	for _, args := range [][]string{
		{"check", "rules", "errand-alerts.yml"},
		{"test", "rules", "errand-alerts_test.yml"},
	} {
		cmd := exec.CommandContext(t.Context(), promtool, args...)
		cmd.Dir = rulesDir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
