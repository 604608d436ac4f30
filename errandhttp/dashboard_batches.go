package errandhttp

import (
	"net/http"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// batchesData is the batches listing.
type batchesData struct {
	Batches []*errandstore.Batch
	States  []errandtype.BatchState
	stateFilter
}

// batchesPage lists batches, newest first, open or completed.
func (d *dashboard) batchesPage(w http.ResponseWriter, r *http.Request) {
	now, err := d.now(r.Context())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	f, err := d.stateFilter(r.URL.Query())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	l := &batchesData{States: errand.BatchStates, stateFilter: f}
	p := &errandstore.BatchListParams{Limit: l.Limit}
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
