package errandhttp

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/errandhq/errand"
)

// batchesData is the batches listing.
type batchesData struct {
	Batches []*errand.Batch
	States  []errand.BatchState
	// State and Limit are the filter as the visitor gave it.
	State string
	Limit int
}

// QueryMore is the query string of the listing with a page twice as long.
// Every value is query-escaped by url.Values, which is what makes it a safe
// template.URL.
func (l *batchesData) QueryMore() template.URL {
	v := url.Values{}
	if l.State != "" {
		v.Set("state", l.State)
	}
	v.Set("limit", strconv.Itoa(min(2*l.Limit, MaxDashboardPageSize)))
	return template.URL(v.Encode())
}

// batchesPage lists batches, newest first, open or completed.
func (d *dashboard) batchesPage(w http.ResponseWriter, r *http.Request) {
	now, err := d.now(r.Context())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	l := &batchesData{States: errand.BatchStates, State: strings.TrimSpace(q.Get("state")), Limit: d.opts.PageSize}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxDashboardPageSize {
			d.fail(w, r, &errand.InputError{Field: "limit", Message: fmt.Sprintf("%q is not a page size; use 1 to %d", s, MaxDashboardPageSize)})
			return
		}
		l.Limit = n
	}
	p := &errand.BatchListParams{Limit: l.Limit}
	if l.State != "" {
		st, err := errand.ParseBatchState(l.State)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		p.State = st
	}
	if l.Batches, err = d.c.Batches(r.Context(), p); err != nil {
		d.fail(w, r, err)
		return
	}
	pg := d.newPage(r, "Batches", "batches", now, true)
	pg.Data = l
	d.render(w, http.StatusOK, "batches", pg)
}
