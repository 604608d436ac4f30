package errandhttp

import (
	"fmt"
	"html/template"
	"net/url"
	"strconv"
	"strings"

	"github.com/errandhq/errand/errandtype"
)

// stateFilter is the filter of the batches and workflows listings as the
// visitor gave it: a state (?state=) and a page size (?limit=).
type stateFilter struct {
	State string
	Limit int
}

// QueryMore is the query string of the listing with a page twice as long.
// Every value is query-escaped by url.Values, which is what makes it a safe
// template.URL.
func (l *stateFilter) QueryMore() template.URL {
	v := url.Values{}
	if l.State != "" {
		v.Set("state", l.State)
	}
	v.Set("limit", strconv.Itoa(min(2*l.Limit, MaxDashboardPageSize)))
	return template.URL(v.Encode())
}

// stateFilter reads a listing's filter from its query: the state trimmed,
// for the caller to check, and the page size, the dashboard's by default.
// A page size that is not 1 to MaxDashboardPageSize is an
// *errandtype.InputError.
func (d *dashboard) stateFilter(q url.Values) (stateFilter, error) {
	f := stateFilter{State: strings.TrimSpace(q.Get("state")), Limit: d.opts.PageSize}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxDashboardPageSize {
			return f, &errandtype.InputError{Field: "limit", Message: fmt.Sprintf("%q is not a page size; use 1 to %d", s, MaxDashboardPageSize)}
		}
		f.Limit = n
	}
	return f, nil
}
