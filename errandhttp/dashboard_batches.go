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
	d.stateListing(w, r, "Batches", "batches", func(f stateFilter) (any, error) {
		l := &batchesData{States: errand.BatchStates, stateFilter: f}
		p := &errandstore.BatchListParams{Limit: l.Limit}
		if l.State != "" {
			st, err := errand.ParseBatchState(l.State)
			if err != nil {
				return nil, err
			}
			p.State = st
		}
		var err error
		l.Batches, err = d.c.Batches(r.Context(), p)
		return l, err
	})
}

// stateListing serves a listing page filtered by state (see stateFilter): load
// reads its data, which the template name renders.
func (d *dashboard) stateListing(w http.ResponseWriter, r *http.Request, title, name string, load func(stateFilter) (any, error)) {
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
	data, err := load(f)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	pg := d.newPage(r, title, name, now, true)
	pg.Data = data
	d.render(w, http.StatusOK, name, pg)
}
