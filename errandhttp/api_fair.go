package errandhttp

import (
	"net/http"
	"strconv"

	"github.com/errandhq/errand"
)

// maxFairnessKeysLimit bounds the keys per queue GET
// /api/v1/fairness-keys returns.
const maxFairnessKeysLimit = 1000

// fairnessKeys answers GET /api/v1/fairness-keys: per queue (or the one
// queue asked for), the fairness keys with the most waiting jobs, most
// first, at most limit per queue (default errand.DefaultFairnessKeysLimit).
func (a *api[TTx]) fairnessKeys(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkQuery(q, "queue", "limit"); err != nil {
		return err
	}
	opts := &errand.FairnessKeysOpts{Queue: q.Get("queue")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxFairnessKeysLimit {
			return badRequest("limit %q is out of range; give 1 to %d", v, maxFairnessKeysLimit)
		}
		opts.Limit = n
	}
	keys, err := a.c.FairnessKeys(r.Context(), opts)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"fairness_keys": keys})
	return nil
}
