package errandhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/errandhq/errand"
	contract "github.com/errandhq/errand/api"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/jsonesc"
)

// Limits of the API.
const (
	// DefaultListLimit is the page size of GET /api/v1/jobs without limit.
	DefaultListLimit = 100
	// MaxListLimit is the largest page; a larger limit is answered 400.
	MaxListLimit = 1000
)

// UnavailableRetryAfter is the Retry-After, in seconds, of a 503
// unavailable answer (the store lost its database): a dropped connection is
// replaced at once, a restarting server takes a few seconds.
const UnavailableRetryAfter = 2

// claimTimeout bounds one claim, which runs on when its caller hangs up.
const claimTimeout = 30 * time.Second

// APIOptions configure [NewAPI].
type APIOptions struct {
	// Logger receives a line per operator action and per internal error.
	// Nil discards.
	Logger *slog.Logger
	// HideArgs leaves args out (null) of jobs the API shows to readers: job
	// reads and listings. Claims still carry them: a worker needs them.
	HideArgs bool
}

// api serves /api/v1 for a client.
type api[TTx any] struct {
	c        *errand.Client[TTx]
	log      *slog.Logger
	hideArgs bool
	// hideLease leaves lease tokens out of the jobs shown to a read-only
	// caller, who could otherwise hand one to a stale writer.
	hideLease bool
}

// route is one endpoint: a Go 1.22 ServeMux pattern and its handler.
type route struct {
	pattern string
	handle  func(w http.ResponseWriter, r *http.Request) error
}

// NewAPI returns the JSON API of c, to be mounted at /api/v1/ (it expects
// full paths, such as /api/v1/jobs) behind [Auth.Wrap], which decides who
// may call it. Requests and responses are JSON; an error is
// {"error": {"code", "message"}}.
func NewAPI[TTx any](c *errand.Client[TTx], opts *APIOptions) http.Handler {
	if opts == nil {
		opts = &APIOptions{}
	}
	a := &api[TTx]{c: c, log: opts.Logger, hideArgs: opts.HideArgs}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	reader := *a
	reader.hideLease = true
	full, redacted := a.handler(), reader.handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, canWrite := Identity(r); !canWrite {
			redacted.ServeHTTP(w, r)
			return
		}
		full.ServeHTTP(w, r)
	})
}

// handler routes the API's endpoints to a's methods.
func (a *api[TTx]) handler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range a.routes() {
		mux.HandleFunc(rt.pattern, func(w http.ResponseWriter, r *http.Request) {
			if err := rt.handle(w, r); err != nil {
				a.writeErr(w, r, err)
			}
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" {
			// The mux answers 404 or 405 (with Allow) in plain text; say it
			// in the API's JSON instead.
			mux.ServeHTTP(&jsonStatusWriter{ResponseWriter: w, r: r}, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// jsonStatusWriter turns the mux's plain-text 404 and 405 into the API's
// JSON errors.
type jsonStatusWriter struct {
	http.ResponseWriter
	r       *http.Request
	written bool
}

func (w *jsonStatusWriter) WriteHeader(code int) {
	if w.written {
		return
	}
	w.written = true
	setSecurityHeaders(w.Header())
	if code == http.StatusMethodNotAllowed {
		writeError(w.ResponseWriter, code, "method_not_allowed", w.r.Method+" is not allowed on "+w.r.URL.Path+"; use "+w.Header().Get("Allow"))
		return
	}
	writeError(w.ResponseWriter, http.StatusNotFound, "not_found", "no such endpoint: "+w.r.Method+" "+w.r.URL.Path)
}

func (w *jsonStatusWriter) Write(b []byte) (int, error) {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	return len(b), nil
}

// routes lists the endpoints. An endpoint is one line here and one method
// below.
func (a *api[TTx]) routes() []route {
	return []route{
		// Producers.
		{"POST /api/v1/jobs", withBody(a.enqueue)},
		{"GET /api/v1/jobs", a.list},
		{"GET /api/v1/jobs/{id}", a.get},
		// Workers in any language.
		{"POST /api/v1/queues/{queue}/claim", withBody(a.claim)},
		{"POST /api/v1/jobs/{id}/heartbeat", withBody(a.heartbeat)},
		{"POST /api/v1/jobs/{id}/ack", withBody(a.ack)},
		{"POST /api/v1/jobs/{id}/fail", withBody(a.fail)},
		{"POST /api/v1/ack", withBody(a.ackMany)},
		{"POST /api/v1/fail", withBody(a.failMany)},
		{"POST /api/v1/jobs/{id}/output", withBody(a.output)},
		{"POST /api/v1/jobs/{id}/steps", withBody(a.recordStep)},
		{"GET /api/v1/jobs/{id}/signals", a.signals},
		{"POST /api/v1/jobs/{id}/snooze", withBody(a.snooze)},
		// Operators.
		{"POST /api/v1/jobs/{id}/replay", withBody(a.replay)},
		{"POST /api/v1/jobs/{id}/cancel", a.cancel},
		{"GET /api/v1/jobs/{id}/audit", a.jobAudit},
		{"GET /api/v1/jobs/{id}/steps", a.jobSteps},
		{"GET /api/v1/jobs/{id}/result", a.jobResult},
		{"GET /api/v1/jobs/{id}/events/{key}", a.jobEvent},
		{"GET /api/v1/jobs/{id}/stream", a.jobStream},
		{"POST /api/v1/jobs/{id}/signal", withBody(a.signal)},
		{"GET /api/v1/audit", a.audit},
		{"POST /api/v1/replay", withBody(a.bulkReplay)},
		{"POST /api/v1/prune", withBody(a.prune)},
		{"GET /api/v1/stats", a.stats},
		{"GET /api/v1/schedules", listing("schedules", a.c.Schedules)},
		// The cluster's rate limits and retry budgets, with their tokens now.
		{"GET /api/v1/limits", listing("limits", a.c.Limits)},
		// Each as errandtype.BreakerRecord marshals, ordered by dependency.
		{"GET /api/v1/breakers", listing("breakers", a.c.Breakers)},
		{"POST /api/v1/breakers/{dependency}/reset", a.resetBreaker},
		{"GET /api/v1/pauses", listing("pauses", a.c.Pauses)},
		{"POST /api/v1/queues/{queue}/pause", a.pauseSet(errandtype.PauseQueue, true)},
		{"POST /api/v1/queues/{queue}/resume", a.pauseSet(errandtype.PauseQueue, false)},
		{"POST /api/v1/kinds/{kind}/pause", a.pauseSet(errandtype.PauseKind, true)},
		{"POST /api/v1/kinds/{kind}/resume", a.pauseSet(errandtype.PauseKind, false)},
		{"DELETE /api/v1/schedules/{name}", a.deleteSchedule},
		{"POST /api/v1/batches", withBody(a.enqueueBatch)},
		{"GET /api/v1/batches", a.batches},
		{"GET /api/v1/batches/{id}", a.batch},
		{"POST /api/v1/workflows", withBody(a.enqueueWorkflow)},
		{"GET /api/v1/workflows", a.workflows},
		{"GET /api/v1/workflows/{id}", a.workflow},
		{"POST /api/v1/workflows/{id}/rerun", withBody(a.rerunWorkflow)},
		{"GET /api/v1/workers", a.workers},
		{"GET /api/v1/fairness-keys", a.fairnessKeys},
		// This list as a contract: api/openapi.yaml.
		{"GET /api/v1/openapi.yaml", serveContract},
	}
}

// serveContract answers the API's contract, api/openapi.yaml.
func serveContract(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("Content-Length", strconv.Itoa(len(contract.OpenAPI)))
	_, _ = w.Write(contract.OpenAPI)
	return nil
}

// httpError is an error with its status and code.
type httpError struct {
	status  int
	code    string
	message string
}

func (e *httpError) Error() string { return e.message }

func badRequest(format string, args ...any) error {
	return &httpError{http.StatusBadRequest, "invalid_input", fmt.Sprintf(format, args...)}
}

// leaseLostMessage explains a 409 lease_lost.
const leaseLostMessage = "the job is no longer running under this lease token; stop working on it (nothing was changed)"

// writeErr answers err: the library's errors by their kind, anything else
// as 500 without its text (which may name database internals), logged.
func (a *api[TTx]) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	var mbe *http.MaxBytesError
	var ie *errandtype.InputError
	var se *errandtype.StateError
	var ue *errandtype.UniqueConflictError
	var ice *errand.IDConflictError
	var we *errandstore.WorkflowStateError
	switch {
	case errors.As(err, &he):
		writeError(w, he.status, he.code, he.message)
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body is over the limit of %d bytes", mbe.Limit))
	case errors.As(err, &ie):
		writeError(w, http.StatusBadRequest, "invalid_input", ie.Error())
	case errors.Is(err, errandtype.ErrLeaseLost):
		writeError(w, http.StatusConflict, "lease_lost", leaseLostMessage)
	case errors.Is(err, errandstore.ErrWorkflowCompensated):
		writeError(w, http.StatusConflict, "workflow_compensated", err.Error())
	case errors.As(err, &we):
		writeError(w, http.StatusConflict, "wrong_state", we.Error())
	case errors.As(err, &se):
		writeError(w, http.StatusConflict, "wrong_state", se.Error())
	case errors.As(err, &ue):
		writeError(w, http.StatusConflict, "unique_conflict", ue.Error())
	case errors.As(err, &ice):
		writeError(w, http.StatusConflict, "id_conflict", fmt.Sprintf("%s id %q is taken by a different %s (%s differ); give a new id for a new %s, or set \"first_wins\": true to get the existing one",
			ice.What, ice.ID, ice.What, strings.Join(ice.Fields, ", "), ice.What))
	case errors.Is(err, errandstore.ErrStepRecorded):
		writeError(w, http.StatusConflict, "step_recorded", "a step is recorded at this index already; read the job's steps and go on from them (nothing was changed)")
	case errors.Is(err, errand.ErrNotFinished):
		writeError(w, http.StatusConflict, "not_finished", err.Error())
	case errors.Is(err, errandtype.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", "no job with id "+strconv.Quote(r.PathValue("id")))
	case errors.Is(err, errandtype.ErrStoreUnavailable):
		a.log.Warn("api request failed: store unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", strconv.Itoa(UnavailableRetryAfter))
		writeError(w, http.StatusServiceUnavailable, "unavailable", fmt.Sprintf("the database could not be reached or dropped the connection; retry in %ds (the request may have taken effect: give an enqueue an id or Idempotency-Key so that a retry is not a second job)", UnavailableRetryAfter))
	default:
		a.log.Error("api request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "the server failed to answer; see its log")
	}
}

// errorBody is the value of an error's "error" field.
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// writeError writes {"error": {"code", "message"}}.
func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, map[string]errorBody{"error": {code, message}})
}

// writeJSON writes v as the response.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		b.Reset()
		b.WriteString(`{"error":{"code":"internal","message":"the response could not be encoded"}}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// decode reads the request body into v strictly: it must be JSON
// (Content-Type application/json), one object, no unknown fields. An empty
// body reads as {}.
func decode(r *http.Request, v any) error {
	// Every endpoint with a body takes its options in the body: a query
	// parameter (?dry_run=true, say) would be ignored, and the request
	// do what its sender did not mean.
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return err // *http.MaxBytesError: 413
	}
	if len(bytes.TrimSpace(b)) == 0 {
		b = []byte("{}")
	} else if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return &httpError{http.StatusUnsupportedMediaType, "unsupported_media_type", "send the body as JSON with Content-Type: application/json"}
	}
	// The decoder would turn invalid UTF-8, and an escaped half of a
	// surrogate pair, into U+FFFD unseen: an id, kind or queue would be
	// stored other than sent, and two different ids taken for one.
	if !utf8.Valid(b) {
		return badRequest("body is not valid UTF-8; encode the text as UTF-8")
	}
	if i := jsonesc.LoneSurrogate(b); i >= 0 {
		return badRequest("%s: contains %s, half of a UTF-16 surrogate pair without its other half, which no store keeps as sent; escape the whole character, or write it unescaped", fieldAt(b, i), b[i:i+6])
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("body is not valid: %s", jsonProblem(b, err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("body holds more than one JSON value; send one object")
	}
	return nil
}

// fieldAt names the field of the JSON document b whose key or value holds
// the byte at off, as a path such as jobs[2].kind, or "body" when b does
// not parse that far.
func fieldAt(b []byte, off int) string {
	at := "body"
	walkJSON(b, func(path string, start, end int64, _ json.Token, _ bool) bool {
		if start <= int64(off) && int64(off) < end {
			at = path
			return true
		}
		return false
	})
	return at
}

// typeErrorField names the field of te, an error of decoding b, as the
// sender wrote it (jobs[2].priority), where te.Field has no indices and
// names the Go structs a field is promoted from (steps.Job.priority). The
// value is the last at that path before te.Offset; an error of a type's
// own UnmarshalJSON has no offset, and its value is the first at that
// path that the type refuses.
func typeErrorField(b []byte, te *json.UnmarshalTypeError) string {
	var parts []string
	for _, p := range strings.Split(te.Field, ".") {
		if p != "" && !unicode.IsUpper(rune(p[0])) {
			parts = append(parts, p)
		}
	}
	want := strings.Join(parts, ".")
	if want == "" {
		want = "body"
	}
	at := want
	walkJSON(b, func(path string, start, end int64, tok json.Token, key bool) bool {
		if key || stripIndices(path) != want {
			return false
		}
		if te.Offset > 0 {
			if start >= te.Offset {
				return true
			}
			at = path
			return false
		}
		raw := bytes.TrimLeft(b[start:end], " \t\r\n:,")
		if _, delim := tok.(json.Delim); delim || json.Unmarshal(raw, reflect.New(te.Type).Interface()) != nil {
			at = path
			return true
		}
		return false
	})
	return at
}

// stripIndices drops the array indices of a path: jobs[2].kind is
// jobs.kind.
func stripIndices(path string) string {
	var sb strings.Builder
	for i := 0; i < len(path); i++ {
		if path[i] == '[' {
			for i < len(path) && path[i] != ']' {
				i++
			}
			continue
		}
		sb.WriteByte(path[i])
	}
	return sb.String()
}

// walkJSON reads the JSON document b token by token and calls visit with
// each token's path (jobs[2].kind; "body" for the document itself), the
// offsets around it (the start may include the separator before it), the
// token, and whether it is an object's key, until visit returns true or b
// ends or fails to parse.
func walkJSON(b []byte, visit func(path string, start, end int64, tok json.Token, key bool) bool) {
	var path jsonPath
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return
		}
		end := dec.InputOffset()
		top := len(path) - 1
		d, isDelim := tok.(json.Delim)
		switch {
		case top >= 0 && path[top].object && !path[top].value:
			if isDelim && d == '}' {
				path = path[:top]
				break
			}
			path[top].key, path[top].value = fmt.Sprint(tok), true
			if visit(path.String(), start, end, tok, true) {
				return
			}
			continue
		case isDelim && (d == ']' || d == '}'):
			path = path[:top] // ] ends an array
		default:
			if visit(path.String(), start, end, tok, false) {
				return
			}
			if isDelim {
				path = append(path, jsonLevel{object: d == '{'})
				continue
			}
		}
		path.valueEnded()
	}
}

// jsonLevel is one object or array that walkJSON is in.
type jsonLevel struct {
	object bool
	key    string
	index  int
	value  bool // an object's next token is a value, not a key
}

// jsonPath is where walkJSON is in a document, outermost first.
type jsonPath []jsonLevel

// String names the path as input errors do: jobs[2].kind, or "body" for
// the document itself.
func (p jsonPath) String() string {
	var sb strings.Builder
	for _, l := range p {
		switch {
		case l.object && sb.Len() > 0:
			sb.WriteString("." + l.key)
		case l.object:
			sb.WriteString(l.key)
		default:
			fmt.Fprintf(&sb, "[%d]", l.index)
		}
	}
	if sb.Len() == 0 {
		return "body"
	}
	return sb.String()
}

// valueEnded moves past a value that ended: the next token of an object
// is a key, of an array the next element.
func (p jsonPath) valueEnded() {
	if top := len(p) - 1; top >= 0 && p[top].object {
		p[top].value = false
	} else if top >= 0 {
		p[top].index++
	}
}

// handler is an endpoint's handler: an error it returns is answered by
// writeErr.
type handler = func(w http.ResponseWriter, r *http.Request) error

// withBody makes the handler of an endpoint with a JSON body: the body is
// decoded (see decode) into a new T, which handle gets.
func withBody[T any](handle func(w http.ResponseWriter, r *http.Request, req *T) error) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		var req T
		if err := decode(r, &req); err != nil {
			return err
		}
		return handle(w, r, &req)
	}
}

// reply answers 200 with v.
func reply(w http.ResponseWriter, v any) error {
	writeJSON(w, http.StatusOK, v)
	return nil
}

// listing makes the handler of a GET without query parameters that answers
// {field: [...]}, the list fetch returns ([] for none).
func listing[T any](field string, fetch func(context.Context) ([]T, error)) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := checkQuery(r.URL.Query()); err != nil {
			return err
		}
		xs, err := fetch(r.Context())
		if err != nil {
			return err
		}
		if xs == nil {
			xs = []T{}
		}
		return reply(w, map[string]any{field: xs})
	}
}

// notFound turns ErrNotFound into a 404 not_found that says message; any
// other error passes.
func notFound(err error, message string) error {
	if errors.Is(err, errandtype.ErrNotFound) {
		return &httpError{http.StatusNotFound, "not_found", message}
	}
	return err
}

// requireReason refuses an operator action without a reason, showing
// example as one.
func requireReason(reason, example string) error {
	if strings.TrimSpace(reason) == "" {
		return badRequest("reason is missing; say why, for the audit, e.g. {\"reason\": %q}", example)
	}
	return nil
}

// reasonExample is the reason the refusal of an action without one shows.
const reasonExample = "receipt service fixed"

// queryLimit reads the query parameter limit, 1 to max; absent, def.
func queryLimit(q url.Values, def, max int) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, badRequest("limit %q is out of range; give 1 to %d", v, max)
	}
	return n, nil
}

// queryFlag reads the query parameter name, "true" or "false"; absent or
// empty, false.
func queryFlag(q url.Values, name string) (bool, error) {
	switch v := q.Get(name); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, badRequest("%s %q is not a flag; give true or false", name, v)
	}
}

// queryCursor reads the query parameter cursor, a position a page of this
// API returned, at least min; absent, 0.
func queryCursor(q url.Values, min int64) (int64, error) {
	v := q.Get("cursor")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < min {
		return 0, badRequest("cursor %q is not one this API returned; pass next_cursor from the previous page", v)
	}
	return n, nil
}

// queryListCursor reads the cursor of a listing that runs newest first
// (batches, workflows): a next_cursor of nextCursor; absent is nil.
func queryListCursor(q url.Values) (*errandtype.ListCursor, error) {
	v := q.Get("cursor")
	if v == "" {
		return nil, nil
	}
	c, err := errand.ParseListCursor(v)
	if err != nil {
		return nil, badRequest("cursor %q is not one this API returned; pass next_cursor from the previous page", v)
	}
	return c, nil
}

// nextCursor is the next_cursor after an item created at at with id id.
func nextCursor(at time.Time, id string) *string {
	s := errandtype.ListCursor{CreatedAt: at, ID: id}.String()
	return &s
}

// jsonProblem says what is wrong with a body in the API's terms.
func jsonProblem(b []byte, err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("malformed JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		if f := typeErrorField(b, te); f != "body" {
			return fmt.Sprintf("field %q must be %s, not %s", f, jsonType(te.Type), te.Value)
		}
		return fmt.Sprintf("the body must be %s, not %s", jsonType(te.Type), te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "JSON ends too early"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ") + "; see the API's field names"
	}
	return err.Error()
}

// jsonType names what a body's field of Go type t holds, in JSON's terms
// and with an example where the text has a form of its own.
func jsonType(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[errandtype.Duration]():
		return "a duration in Go syntax such as \"30s\" or \"1h\""
	case reflect.TypeFor[Time]():
		return "a time in RFC 3339 such as \"2026-12-04T10:00:00Z\""
	case reflect.TypeFor[errandtype.UniqueScope]():
		return "a scope: \"always\", \"until_finished\", \"until_succeeded\" or a comma-separated list of states"
	case reflect.TypeFor[errand.OrderingOnDead]():
		return "\"hold\" or \"release\""
	}
	switch t.Kind() {
	case reflect.Pointer:
		return jsonType(t.Elem())
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array of " + plural(jsonType(t.Elem()))
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "another JSON type"
}

// plural turns "a string" into "strings" for "an array of strings".
func plural(what string) string {
	for _, article := range []string{"a ", "an "} {
		if rest, ok := strings.CutPrefix(what, article); ok && !strings.Contains(rest, " ") {
			return rest + "s"
		}
	}
	return what
}

// checkQuery refuses query parameters the endpoint does not know, so that
// a misspelt filter is an error instead of a listing of everything.
func checkQuery(q url.Values, known ...string) error {
	for k := range q {
		switch {
		case slices.Contains(known, k):
		case len(known) == 0:
			return badRequest("unknown query parameter %q; this endpoint takes none (an endpoint with a body takes its options in the body)", k)
		default:
			return badRequest("unknown query parameter %q; use %s", k, strings.Join(known, ", "))
		}
	}
	return nil
}

// show prepares a job for a reader: args, and the progress and output a
// handler saved (often drawn from them), hidden when configured, and the
// lease token hidden from a read-only caller.
func (a *api[TTx]) show(j *errandtype.Job) *errandtype.Job {
	if j == nil || !a.hideArgs && (!a.hideLease || j.LeaseToken == nil) {
		return j
	}
	c := *j
	if a.hideArgs {
		c.Args = nil
		c.Progress = nil
		c.Output = nil
	}
	if a.hideLease {
		c.LeaseToken = nil
	}
	return &c
}

// showJobs prepares jobs for a reader as show does; nil becomes [].
func (a *api[TTx]) showJobs(js []*errandtype.Job) []*errandtype.Job {
	out := make([]*errandtype.Job, len(js))
	for i, j := range js {
		out[i] = a.show(j)
	}
	return out
}

// enqueueResponse is the answer to POST /api/v1/jobs.
type enqueueResponse struct {
	Job *errandtype.Job `json:"job"`
	// Duplicate: a job with this id (or Idempotency-Key), or unique key,
	// existed; Job is that job and nothing was enqueued.
	Duplicate bool `json:"duplicate"`
	// Absorbed: the job's debounce key folded it into Job (duplicate is
	// set too).
	Absorbed bool `json:"absorbed"`
}

// IdempotencyHeader names the request header whose value makes a retried
// POST /api/v1/jobs return the first request's job. The key becomes the
// job's id, so it lasts as long as the job: retrying after the job was
// pruned enqueues it again.
const IdempotencyHeader = "Idempotency-Key"

// idempotencyKey returns the request's Idempotency-Key, which becomes *id,
// the id of the job, batch or workflow (what) it enqueues. An id in the
// body that differs from the key is a 400.
func idempotencyKey(r *http.Request, id *string, what string) (string, error) {
	key := r.Header.Get(IdempotencyHeader)
	if key != "" {
		if *id != "" && *id != key {
			return "", badRequest("id %q and the %s %q differ; the key becomes the %s's id, so send one of them", *id, IdempotencyHeader, key, what)
		}
		*id = key
	}
	return key, nil
}

// keyError names the Idempotency-Key in err, a refusal of the id the key
// became (see idempotencyKey), so that the caller, who sent no id, learns
// what to change.
func keyError(err error, key string) error {
	var ie *errandtype.InputError
	if key == "" || !errors.As(err, &ie) || (ie.Field != "id" && ie.Field != "batch id" && ie.Field != "workflow id") {
		return err
	}
	what := ie.Field
	if what == "id" {
		what = "job's id"
	}
	return badRequest("%s %q becomes the %s, and is refused: %s", IdempotencyHeader, key, what, ie.Message)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// keyConflict is the answer to err, an *errand.IDConflictError of the id
// that the request's Idempotency-Key became: the key was used for a
// different job, batch or workflow.
func keyConflict(err error, key string) error {
	var ice *errand.IDConflictError
	if key == "" || !errors.As(err, &ice) {
		return err
	}
	return &httpError{http.StatusConflict, "idempotency_conflict",
		fmt.Sprintf("%s %q was used for a different %s (%s differ); use a new key for a new %s, or set \"first_wins\": true to get the existing one",
			IdempotencyHeader, key, ice.What, strings.Join(ice.Fields, ", "), ice.What)}
}

// enqueueStatus is the status of an answer to an enqueue: 201 when it
// enqueued, 200 when the id, key or unique key named an existing job,
// batch or workflow, which is then, under an Idempotency-Key, the first
// request's (Idempotent-Replayed).
func enqueueStatus(w http.ResponseWriter, duplicate bool, key string) int {
	if !duplicate {
		return http.StatusCreated
	}
	if key != "" {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	return http.StatusOK
}

func (a *api[TTx]) enqueue(w http.ResponseWriter, r *http.Request, req *JobRequest) error {
	key, err := idempotencyKey(r, &req.ID, "job")
	if err != nil {
		return err
	}
	p, err := req.params("")
	if err != nil {
		return err
	}
	res, err := a.c.Enqueue(enqueueContext(r), p.Args, p.Opts)
	if err != nil {
		return keyConflict(keyError(err, key), key)
	}
	writeJSON(w, enqueueStatus(w, res.Duplicate, key), enqueueResponse{Job: a.show(res.Job), Duplicate: res.Duplicate, Absorbed: res.Absorbed})
	return nil
}

func (a *api[TTx]) get(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	j, err := a.c.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return reply(w, a.show(j))
}

// listResponse is a page of jobs. NextCursor, when not null, fetches the
// next page as ?cursor=.
type listResponse struct {
	Jobs       []*errandtype.Job `json:"jobs"`
	NextCursor *string           `json:"next_cursor"`
}

func (a *api[TTx]) list(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkQuery(q, "state", "queue", "kind", "limit", "cursor", "args_has", "output_has", "tag", "class", "absorbed", "aged"); err != nil {
		return err
	}
	if a.hideArgs && (q.Has("args_has") || q.Has("output_has")) {
		return &httpError{http.StatusForbidden, "forbidden", "this server hides jobs' args and output from this token (HideArgs), and a search of them would reveal them; search by tag, or use an operator's token"}
	}
	opts := &errand.ListOpts{Queue: q.Get("queue"), Kind: q.Get("kind"), Tags: q["tag"], Class: q.Get("class")}
	var err error
	if opts.Absorbed, err = queryFlag(q, "absorbed"); err != nil {
		return err
	}
	if opts.Aged, err = queryFlag(q, "aged"); err != nil {
		return err
	}
	if v := q.Get("args_has"); v != "" {
		opts.ArgsHas = json.RawMessage(v)
	}
	if v := q.Get("output_has"); v != "" {
		opts.OutputHas = json.RawMessage(v)
	}
	for _, v := range q["state"] {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue // ?state= filters nothing, like the other filters
			}
			st, err := errandtype.ParseJobState(s)
			if err != nil {
				return badRequest("state: %v", err)
			}
			opts.States = append(opts.States, st)
		}
	}
	if opts.Limit, err = queryLimit(q, DefaultListLimit, MaxListLimit); err != nil {
		return err
	}
	if opts.AfterSeq, err = queryCursor(q, 0); err != nil {
		return err
	}
	js, err := a.c.List(r.Context(), opts)
	if err != nil {
		return err
	}
	resp := listResponse{Jobs: make([]*errandtype.Job, len(js))}
	for i, j := range js {
		resp.Jobs[i] = a.show(j)
	}
	if len(js) == opts.Limit {
		next := strconv.FormatInt(js[len(js)-1].Seq, 10)
		resp.NextCursor = &next
	}
	return reply(w, resp)
}

// claimRequest is the body of POST /api/v1/queues/{queue}/claim.
type claimRequest struct {
	// Kinds the worker handles; at least one.
	Kinds []string `json:"kinds"`
	// Lease, in Go syntax ("30s"); default (absent or null) 30s.
	Lease *errandtype.Duration `json:"lease"`
	// MaxJobs is how many jobs to take at most: 1 to 100, default 1.
	MaxJobs *int `json:"max_jobs"`
	// Worker names the worker: its lease_owner and registry id are
	// http:TOKEN_NAME/WORKER, or http:TOKEN_NAME without it.
	Worker string `json:"worker"`
}

// claimResponse holds the claimed jobs' envelopes.
type claimResponse struct {
	Jobs []errandtype.Envelope `json:"jobs"`
}

func (a *api[TTx]) claim(w http.ResponseWriter, r *http.Request, req *claimRequest) error {
	// A caller names workers only under its own token's name, so that it
	// cannot take over the registry row (or lease_owner) of a Go worker,
	// or of a worker claiming with another token.
	name, _ := Identity(r)
	owner := "http:" + name
	if req.Worker != "" {
		owner += "/" + req.Worker
	}
	// A claim is not cancelled once sent, even if the caller hangs up: a
	// claim cut off half-way could commit with nobody to hand the jobs to,
	// and they would wait out their lease. claimTimeout bounds it.
	limit, err := optCount("max_jobs", req.MaxJobs, errand.MaxClaimJobs, 0)
	if err != nil {
		return err
	}
	lease, err := optLease(req.Lease)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), claimTimeout)
	defer cancel()
	js, err := a.c.Claim(ctx, &errand.ClaimOpts{Queue: r.PathValue("queue"), Kinds: req.Kinds,
		Lease: lease, Limit: limit, Owner: owner})
	if err != nil {
		return err
	}
	if len(js) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	resp := claimResponse{Jobs: make([]errandtype.Envelope, len(js))}
	for i, j := range js {
		resp.Jobs[i] = j.Envelope()
	}
	return reply(w, resp)
}

// heartbeatRequest is the body of POST /api/v1/jobs/{id}/heartbeat.
type heartbeatRequest struct {
	LeaseToken string               `json:"lease_token"`
	Lease      *errandtype.Duration `json:"lease"`
}

// optLease reads an optional lease: absent (nil) is 0, the library's
// default. A lease sent as "0s" is a lease too short, not the default: the
// library would take its zero for absent and grant 30s unasked.
func optLease(d *errandtype.Duration) (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	if *d == 0 {
		return 0, badRequest("lease: 0s is too short; give %s to %s, or leave it out for the default %s", errand.MinLease, errand.MaxLease, errand.DefaultLease)
	}
	return time.Duration(*d), nil
}

func (a *api[TTx]) heartbeat(w http.ResponseWriter, r *http.Request, req *heartbeatRequest) error {
	id := r.PathValue("id")
	lease, err := optLease(req.Lease)
	if err != nil {
		return err
	}
	hb, err := a.c.HeartbeatJob(r.Context(), id, req.LeaseToken, lease)
	if err != nil {
		return err
	}
	return reply(w, heartbeatResponse{ID: id, LeaseUntil: hb.LeaseUntil.UTC(), CancelRequested: hb.CancelRequested})
}

// heartbeatResponse is the answer to a heartbeat, its fields in the order
// docs/http-api.md shows them.
type heartbeatResponse struct {
	ID         string    `json:"id"`
	LeaseUntil time.Time `json:"lease_until"`
	// CancelRequested: an operator cancelled the job; stop working on it
	// and report the attempt with fail, which ends the job cancelled.
	CancelRequested bool `json:"cancel_requested"`
}

// ackRequest is the body of POST /api/v1/jobs/{id}/ack.
type ackRequest struct {
	LeaseToken string `json:"lease_token"`
}

// outcomeResponse is what an ack or a fail did.
type outcomeResponse struct {
	ID    string              `json:"id"`
	State errandtype.JobState `json:"state"`
	// AvailableAt is when a retried job runs next; null otherwise.
	AvailableAt *time.Time `json:"available_at"`
}

func outcome(id string, r errandstore.OutcomeResult) outcomeResponse {
	resp := outcomeResponse{ID: id, State: r.State}
	if r.State == errandtype.StateRetrying || r.State == errandtype.StateQueued {
		at := r.AvailableAt.UTC()
		resp.AvailableAt = &at
	}
	return resp
}

func (a *api[TTx]) ack(w http.ResponseWriter, r *http.Request, req *ackRequest) error {
	id := r.PathValue("id")
	res, err := a.c.Ack(r.Context(), id, req.LeaseToken)
	if err != nil {
		return err
	}
	return reply(w, outcome(id, res))
}

// ackManyRequest is the body of POST /api/v1/ack: up to
// errand.MaxClaimJobs leases to acknowledge in one transaction.
type ackManyRequest struct {
	Jobs []struct {
		ID         string `json:"id"`
		LeaseToken string `json:"lease_token"`
	} `json:"jobs"`
}

// manyResult is one entry's outcome in a batch ack or fail: a state (and,
// for a retried job, when it runs next), or an error (lease_lost) with
// nothing written for that job.
type manyResult struct {
	ID          string              `json:"id"`
	State       errandtype.JobState `json:"state,omitempty"`
	AvailableAt *time.Time          `json:"available_at,omitempty"`
	Error       *errorBody          `json:"error,omitempty"`
}

// manyResults answers a batch whose entries name ids with the results rs.
func manyResults(w http.ResponseWriter, ids []string, rs []errandstore.OutcomeResult) error {
	out := make([]manyResult, len(rs))
	for i, res := range rs {
		if res.Err != nil {
			out[i] = manyResult{ID: ids[i], Error: &errorBody{Code: "lease_lost", Message: leaseLostMessage}}
			continue
		}
		o := outcome(ids[i], res)
		out[i] = manyResult{ID: ids[i], State: o.State, AvailableAt: o.AvailableAt}
	}
	return reply(w, map[string]any{"results": out})
}

func (a *api[TTx]) ackMany(w http.ResponseWriter, r *http.Request, req *ackManyRequest) error {
	leases := make([]errandstore.JobLease, len(req.Jobs))
	ids := make([]string, len(req.Jobs))
	for i, j := range req.Jobs {
		leases[i] = errandstore.JobLease{ID: j.ID, LeaseToken: j.LeaseToken}
		ids[i] = j.ID
	}
	rs, err := a.c.AckMany(r.Context(), leases)
	if err != nil {
		return err
	}
	return manyResults(w, ids, rs)
}

// failRequest is the body of POST /api/v1/jobs/{id}/fail.
type failRequest struct {
	LeaseToken string              `json:"lease_token"`
	Class      string              `json:"class"`
	Message    string              `json:"message"`
	Stack      string              `json:"stack"`
	RetryAfter errandtype.Duration `json:"retry_after"`
	Permanent  bool                `json:"permanent"`
}

// opts are the failure's options.
func (req *failRequest) opts() errand.FailOpts {
	return errand.FailOpts{Class: req.Class, Message: req.Message, Stack: req.Stack,
		RetryAfter: time.Duration(req.RetryAfter), Permanent: req.Permanent}
}

func (a *api[TTx]) fail(w http.ResponseWriter, r *http.Request, req *failRequest) error {
	id := r.PathValue("id")
	o := req.opts()
	res, err := a.c.Fail(r.Context(), id, req.LeaseToken, &o)
	if err != nil {
		return err
	}
	return reply(w, outcome(id, res))
}

// failManyRequest is the body of POST /api/v1/fail: up to
// errand.MaxClaimJobs failed attempts to record in one transaction, each
// with the fields of POST /api/v1/jobs/{id}/fail and its job's id.
type failManyRequest struct {
	Jobs []struct {
		ID string `json:"id"`
		failRequest
	} `json:"jobs"`
}

func (a *api[TTx]) failMany(w http.ResponseWriter, r *http.Request, req *failManyRequest) error {
	fails := make([]errand.JobFailure, len(req.Jobs))
	ids := make([]string, len(req.Jobs))
	for i, j := range req.Jobs {
		fails[i] = errand.JobFailure{JobLease: errandstore.JobLease{ID: j.ID, LeaseToken: j.LeaseToken}, FailOpts: j.opts()}
		ids[i] = j.ID
	}
	rs, err := a.c.FailMany(r.Context(), fails)
	if err != nil {
		return err
	}
	return manyResults(w, ids, rs)
}

// reasonRequest is the body of an operator action on one job.
type reasonRequest struct {
	// Reason says why, for the audit; required.
	Reason string `json:"reason"`
}

// operatorReason reads the reason of an operator action and names the
// operator from the caller's token.
func operatorReason(r *http.Request) (operator, reason string, err error) {
	var req reasonRequest
	if err := decode(r, &req); err != nil {
		return "", "", err
	}
	if err := requireReason(req.Reason, reasonExample); err != nil {
		return "", "", err
	}
	operator, _ = Identity(r)
	return operator, req.Reason, nil
}

// cancel cancels a waiting job, or requests the cancel of a running one
// (the job comes back running, with cancel_requested_at set); the audit
// records the operator and reason.
func (a *api[TTx]) cancel(w http.ResponseWriter, r *http.Request) error {
	operator, reason, err := operatorReason(r)
	if err != nil {
		return err
	}
	j, err := a.c.Cancel(r.Context(), r.PathValue("id"), &errand.CancelOpts{Operator: operator, Reason: reason})
	if err != nil {
		return err
	}
	msg := "job cancelled"
	if j.CancelPending() {
		msg = "job cancel requested"
	}
	a.log.Info(msg, "job_id", j.ID, "operator", operator, "reason", reason)
	return reply(w, a.show(j))
}

func (a *api[TTx]) jobAudit(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	id := r.PathValue("id")
	if _, err := a.c.Get(r.Context(), id); err != nil {
		return err
	}
	rs, err := a.c.ReplayAudit(r.Context(), id)
	if err != nil {
		return err
	}
	if rs == nil {
		rs = []errandtype.ReplayRecord{}
	}
	return reply(w, map[string]any{"audit": rs})
}

// signalRequest is the body of POST /api/v1/jobs/{id}/signal.
type signalRequest struct {
	Name string `json:"name"`
	// Value is the signal's value; absent, true.
	Value json.RawMessage `json:"value"`
}

// signal sends a job the signal its handler waits for (errand.WaitFor).
func (a *api[TTx]) signal(w http.ResponseWriter, r *http.Request, req *signalRequest) error {
	if req.Name == "" {
		return badRequest(`give "name", the signal's name, e.g. {"name": "approval", "value": {"ok": true}}`)
	}
	value := req.Value
	if len(value) == 0 {
		value = json.RawMessage("true")
	}
	id := r.PathValue("id")
	if err := a.c.Signal(r.Context(), id, req.Name, value); err != nil {
		return err
	}
	return reply(w, map[string]any{"job_id": id, "signal": req.Name})
}

// maxResultWait bounds the wait of GET /api/v1/jobs/{id}/result: a caller
// that waits longer asks again.
const maxResultWait = time.Minute

// jobResult answers what a finished job came to, waiting up to ?wait= (a
// Go duration, at most a minute) for it to finish.
func (a *api[TTx]) jobResult(w http.ResponseWriter, r *http.Request) error {
	wait, err := waitQuery(r)
	if err != nil {
		return err
	}
	res, err := a.c.Result(r.Context(), r.PathValue("id"), wait)
	if err != nil {
		return err
	}
	if a.hideArgs {
		res.Output = nil
	}
	return reply(w, res)
}

// waitQuery reads the only query parameter of a read that waits, ?wait=,
// a Go duration of at most maxResultWait; zero when absent.
func waitQuery(r *http.Request) (time.Duration, error) {
	q := r.URL.Query()
	if err := checkQuery(q, "wait"); err != nil {
		return 0, err
	}
	s := q.Get("wait")
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > maxResultWait {
		return 0, badRequest("wait %q: give a duration from 0s to %s, e.g. wait=10s", s, maxResultWait)
	}
	return d, nil
}

// jobEvent answers an event a job published (errand.SetEvent), waiting up
// to ?wait= for it; 404 no_event when it has not been published.
func (a *api[TTx]) jobEvent(w http.ResponseWriter, r *http.Request) error {
	wait, err := waitQuery(r)
	if err != nil {
		return err
	}
	ev, err := a.c.GetEvent(r.Context(), r.PathValue("id"), r.PathValue("key"), wait)
	if errors.Is(err, errand.ErrNoEvent) {
		return &httpError{http.StatusNotFound, "no_event", err.Error()}
	}
	if err != nil {
		return err
	}
	if a.hideArgs && a.hideLease {
		ev.Value = nil
	}
	return reply(w, ev)
}

// jobStream answers a job's output stream: as JSON, the chunks after
// ?after= (a page, with the job's state), waiting up to ?wait= for one
// while the job runs; with Accept: text/event-stream, as server-sent
// events (see serveStream).
func (a *api[TTx]) jobStream(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkQuery(q, "after", "wait"); err != nil {
		return err
	}
	after, err := streamAfter(r)
	if err != nil {
		return err
	}
	if a.hideArgs && a.hideLease {
		return &httpError{http.StatusForbidden, "forbidden", "this server hides jobs' data from read-only tokens (HideArgs), and a job's stream is its data; use a worker's or an operator's token"}
	}
	id := r.PathValue("id")
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		var wait time.Duration
		if s := q.Get("wait"); s != "" {
			if wait, err = time.ParseDuration(s); err != nil || wait < 0 || wait > maxResultWait {
				return badRequest("wait %q: give a duration from 0s to %s, e.g. wait=10s", s, maxResultWait)
			}
		}
		page, err := a.c.ReadStream(r.Context(), id, after, errand.MaxStreamPage, wait)
		if err != nil {
			return err
		}
		return reply(w, map[string]any{"chunks": page.Chunks, "state": page.State, "finished": page.State.Terminal()})
	}
	return serveStream(w, r, a.c, id, after, a.log)
}

// firstOf returns the first of ss that is not empty.
func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// jobSteps answers the steps a job's durable handler recorded, in order;
// their results are hidden as args are (APIOptions.HideArgs).
func (a *api[TTx]) jobSteps(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	steps, err := a.c.Steps(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	if a.hideArgs && a.hideLease {
		for i := range steps {
			steps[i].Result = nil
		}
	}
	return reply(w, map[string]any{"steps": steps})
}

// stepRequest is the body of POST /api/v1/jobs/{id}/steps: a remote
// worker's step, fenced by its lease token.
type stepRequest struct {
	LeaseToken string          `json:"lease_token"`
	Index      *int            `json:"index"`
	Name       string          `json:"name"`
	Result     json.RawMessage `json:"result"`
	Error      string          `json:"error"`
}

// recordStep records a remote worker's step of a durable handler.
func (a *api[TTx]) recordStep(w http.ResponseWriter, r *http.Request, req *stepRequest) error {
	if req.Index == nil {
		return badRequest(`give "index", the step's place in the handler's order from 0: the number of steps the job has recorded`)
	}
	step := errandtype.Step{Index: *req.Index, Name: req.Name, Result: req.Result, Error: req.Error}
	if string(step.Result) == "null" && step.Error != "" {
		step.Result = nil
	}
	id := r.PathValue("id")
	if err := a.c.RecordStep(r.Context(), id, req.LeaseToken, step); err != nil {
		return err
	}
	return reply(w, map[string]any{"job_id": id, "index": step.Index})
}

// signals answers the signals of ?name= sent to a job, oldest first.
func (a *api[TTx]) signals(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkQuery(q, "name"); err != nil {
		return err
	}
	name := q.Get("name")
	if name == "" {
		return badRequest("give ?name=, the signal's name")
	}
	sigs, err := a.c.Signals(r.Context(), r.PathValue("id"), name)
	if err != nil {
		return err
	}
	if sigs == nil {
		sigs = []errandtype.Signal{}
	}
	if a.hideArgs && a.hideLease {
		for i := range sigs {
			sigs[i].Value = nil
		}
	}
	return reply(w, map[string]any{"signals": sigs})
}

// snoozeRequest is the body of POST /api/v1/jobs/{id}/snooze.
type snoozeRequest struct {
	LeaseToken string              `json:"lease_token"`
	Delay      errandtype.Duration `json:"delay"`
}

// snooze ends a remote worker's attempt by putting the job back for a
// while, without counting the attempt: a remote sleep or wait.
func (a *api[TTx]) snooze(w http.ResponseWriter, r *http.Request, req *snoozeRequest) error {
	id := r.PathValue("id")
	res, err := a.c.Snooze(r.Context(), id, req.LeaseToken, time.Duration(req.Delay))
	if err != nil {
		return err
	}
	return reply(w, outcome(id, res))
}

func (a *api[TTx]) workers(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	ws, err := a.c.Workers(r.Context())
	if err != nil {
		return err
	}
	if ws == nil {
		ws = []*errandtype.WorkerRecord{}
	}
	leader, err := a.c.Leader(r.Context())
	if err != nil && !errors.Is(err, errandtype.ErrNotFound) {
		return err
	}
	return reply(w, map[string]any{"workers": ws, "leader": leader})
}
