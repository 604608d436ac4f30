package errandhttp

import (
	"net/http"

	"github.com/errandhq/errand"
)

// maxFairnessKeysLimit bounds the keys per queue GET
// /api/v1/fairness-keys returns.
const maxFairnessKeysLimit = 1000

// fairnessKeys answers GET /api/v1/fairness-keys: per queue (or the one
// queue asked for), the fairness keys with the most waiting jobs, most
// first, at most limit per queue (default errandstore.DefaultFairnessKeysLimit).
func (a *api[TTx]) fairnessKeys(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkQuery(q, "queue", "limit"); err != nil {
		return err
	}
	limit, err := queryLimit(q, 0, maxFairnessKeysLimit)
	if err != nil {
		return err
	}
	keys, err := a.c.FairnessKeys(r.Context(), &errand.FairnessKeysOpts{Queue: q.Get("queue"), Limit: limit})
	if err != nil {
		return err
	}
	return reply(w, map[string]any{"fairness_keys": keys})
}
