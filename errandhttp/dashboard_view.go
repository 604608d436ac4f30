package errandhttp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/english"
)

// dashboardPages names the page templates under dashboard/templates; each
// defines "content" for layout.html.
var dashboardPages = []string{"overview", "jobs", "dead", "job", "action", "problem", "audit", "schedules", "retention", "replayfilter", "fixreplay", "batches", "batch", "workflows", "workflow", "apidoc"}

// parseDashboardPages parses each page with the layout. Links in the pages
// start with prefix.
func parseDashboardPages(prefix string) map[string]*template.Template {
	funcs := template.FuncMap{
		"jobURL":      func(id string) string { return prefix + "/jobs/" + url.PathEscape(id) },
		"path":        func(p string) string { return prefix + p },
		"batchURL":    func(id string) string { return prefix + "/batches/" + url.PathEscape(id) },
		"workflowURL": func(id string) string { return prefix + "/workflows/" + url.PathEscape(id) },
		"states":      func() []errandtype.JobState { return errandtype.JobStates },
		"time":        formatTime,
		"optTime":     formatOptTime,
		"since":       since,
		"ageSeconds":  ageSeconds,
		"prettyJSON":  prettyJSON,
		"shortJSON":   shortJSON,
		"sealed":      func(raw json.RawMessage) bool { _, ok := errand.SealedKeyID(raw); return ok },
		"shortText":   shortText,
		// failing: a job whose last failure is worth showing beside its
		// state, one that did not succeed since.
		"failing": func(s *errandtype.JobState, e *errandtype.LastError) bool {
			return s != nil && e != nil && *s != errandtype.StateSucceeded
		},
		"deref":      deref,
		"count":      func(m map[errandtype.JobState]int, s errandtype.JobState) int { return m[s] },
		"counted":    english.Count[int],
		"join":       strings.Join,
		"canReplay":  replayAction.Applies,
		"canCancel":  cancelAction.Applies,
		"queueNames": queueNames,
		"perMinute":  perMinute,
		"percent":    percent,
		"seconds":    seconds,
		"code":       codeSpans,
		"keptFor":    keptFor,
	}
	pages := make(map[string]*template.Template, len(dashboardPages))
	for _, name := range dashboardPages {
		pages[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(dashboardFiles,
			"dashboard/templates/layout.html", "dashboard/templates/"+name+".html"))
	}
	return pages
}

// timeNow is the store's time for r, or the process's when the store
// cannot say.
func (d *dashboard) timeNow(r *http.Request) time.Time {
	if now, err := d.now(r.Context()); err == nil {
		return now
	}
	return time.Now().UTC()
}

func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

func formatOptTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return formatTime(*t)
}

// since says how long before now t was ("3m ago"), or how long after
// ("in 3m").
func since(now, t time.Time) string {
	d := now.Sub(t)
	if d < 0 {
		return "in " + roughDuration(-d)
	}
	return roughDuration(d) + " ago"
}

// ageSeconds formats an age given in seconds; "-" for none.
func ageSeconds(s float64) string {
	if s <= 0 {
		return "-"
	}
	return roughDuration(time.Duration(s * float64(time.Second)))
}

// roughDuration rounds d to what a person needs: seconds under a minute,
// then minutes and seconds, hours and minutes, days and hours.
func roughDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	default:
		return fmt.Sprintf("%dd%02dh", int(math.Floor(d.Hours()/24)), int(d%(24*time.Hour)/time.Hour))
	}
}

// prettyJSON indents a JSON document for reading; anything else is shown
// as it is.
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	if sealed, ok := sealedText(raw); ok {
		return sealed
	}
	raw = errand.RedactSealed(raw) // sealed values inside, as an audit record's args
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// sealedText is what the dashboard shows of a sealed value its client's
// codec could not open (see errand.Config.Codec): the key it needs, never
// the ciphertext.
func sealedText(raw json.RawMessage) (string, bool) {
	kid, ok := errand.SealedKeyID(raw)
	if !ok {
		return "", false
	}
	return "encrypted with key " + kid + "; serve with that key (--codec-keys-file) to read it", true
}

// shortJSONRunes bounds a checkpoint shown in a list row.
const shortJSONRunes = 60

// shortJSON is a JSON document on one line, compacted and cut at
// shortJSONRunes with an ellipsis: a checkpoint in a row of the job list.
// shortText is the first line of s, cut to shortJSONRunes.
func shortText(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	if r := []rune(s); len(r) > shortJSONRunes {
		s = string(r[:shortJSONRunes-1]) + "…"
	}
	return s
}

func shortJSON(raw json.RawMessage) string {
	if sealed, ok := sealedText(raw); ok {
		return sealed
	}
	var b bytes.Buffer
	s := string(raw)
	if err := json.Compact(&b, raw); err == nil {
		s = b.String()
	}
	if r := []rune(s); len(r) > shortJSONRunes {
		s = string(r[:shortJSONRunes-1]) + "…"
	}
	return s
}

// queueNames lists a worker's queues with their concurrency: "default×4".
func queueNames(qs []errandtype.WorkerQueue) string {
	names := make([]string, len(qs))
	for i, q := range qs {
		names[i] = fmt.Sprintf("%s×%d", q.Name, q.Concurrency)
		if q.Weight > 0 {
			names[i] += fmt.Sprintf(" (weight %d)", q.Weight)
		}
	}
	return strings.Join(names, ", ")
}

// perMinute formats a rate per minute.
func perMinute(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// percent formats a ratio as a percentage.
func percent(v float64) string {
	if v == 0 {
		return "0%"
	}
	return strconv.FormatFloat(v*100, 'f', 1, 64) + "%"
}

// seconds formats a duration given in seconds, to the millisecond under
// a second; "-" without samples.
func seconds(p errand.Percentiles, which string) string {
	if p.Samples == 0 {
		return "-"
	}
	s := p.P50Seconds
	if which == "p99" {
		s = p.P99Seconds
	}
	if s < 1 {
		return strconv.FormatFloat(s*1000, 'f', 0, 64) + "ms"
	}
	if s < 60 {
		return strconv.FormatFloat(s, 'f', 1, 64) + "s"
	}
	return roughDuration(time.Duration(s * float64(time.Second)))
}

// keptFor is a retention age as the retention page shows it: "kept" for
// 0 (never deleted), else the age without trailing zero units (168h).
func keptFor(d time.Duration) string {
	if d <= 0 {
		return "kept"
	}
	s := d.String()
	s, _ = strings.CutSuffix(s, "0s")
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
