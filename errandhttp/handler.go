package errandhttp

import (
	"fmt"
	"net/http"

	"github.com/errandhq/errand"
)

// Options configure [New]: the middleware's, the API's, and the handlers
// other parts of errandhttp (or the application) provide for the other
// mount points. A nil handler leaves its path unserved (404).
type Options struct {
	// Auth is the middleware's configuration: tokens, body cap, trusted
	// origins. Nil means no tokens (see [AuthOptions.Tokens]).
	Auth *AuthOptions
	// API configures the JSON API at /api/v1/.
	API *APIOptions
	// Dashboard is served at / (everything no other mount point takes).
	// Give it [Identity] as its way to know the caller.
	Dashboard http.Handler
	// Metrics is served at /metrics.
	Metrics http.Handler
	// Healthz is served at /healthz to anyone, without a token, so that a
	// liveness probe needs no credentials: it must reveal nothing (see
	// [NewHealthz]). Readyz is served at /readyz behind the middleware,
	// since its reasons name queues and database errors.
	Healthz http.Handler
	Readyz  http.Handler
}

// New composes errand's HTTP surface for c, every part but /healthz behind
// the [Auth] middleware: the JSON API at /api/v1/, /login and /logout, and
// the handlers of opts at /, /metrics and /readyz; /healthz gets only the
// security headers and the body cap. It returns an error when the tokens
// are invalid.
func New[TTx any](c *errand.Client[TTx], opts *Options) (http.Handler, error) {
	if opts == nil {
		opts = &Options{}
	}
	auth, err := NewAuth(opts.Auth)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", NewAPI(c, opts.API))
	for path, h := range map[string]http.Handler{
		"/metrics": opts.Metrics,
		"/readyz":  opts.Readyz,
		"/":        opts.Dashboard,
	} {
		if h != nil {
			mux.Handle(path, h)
		}
	}
	if opts.Dashboard == nil {
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusNotFound, "not_found", "nothing is served at "+r.URL.Path+"; the JSON API is at /api/v1/")
		})
	}
	if opts.Healthz == nil {
		return auth.Wrap(mux), nil
	}
	outer := http.NewServeMux()
	outer.Handle("/healthz", auth.WrapPublic(opts.Healthz))
	outer.Handle("/", auth.Wrap(mux))
	return outer, nil
}
