package errandhttp

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/errandhq/errand"
)

// TestJobFieldsAreEnqueueOpts holds the JSON API's job, the body of
// POST /api/v1/jobs and a batch's member, to errand.EnqueueOpts: every
// option has a JSON field of its name, and every JSON field reaches an
// option, so that adding one to either without the other fails here.
func TestJobFieldsAreEnqueueOpts(t *testing.T) {
	checkFields(t, reflect.TypeFor[JobRequest](), map[string]string{
		"kind": "the args' kind (EnqueueParams.Args)",
		"args": "the args themselves (EnqueueParams.Args)",
		// The unique key's scope and window, flat in JSON, are
		// EnqueueOpts.Unique; so is the key when either is given.
		"unique_scope": "Unique.Scope", "unique_window": "Unique.Window",
		"debounce_key": "Debounce.Key", "debounce_mode": "Debounce.Mode",
		"debounce_window": "Debounce.Window", "debounce_max_wait": "Debounce.MaxWait",
	}, map[string]string{
		"Unique":    "unique_key, unique_scope and unique_window",
		"UniqueKey": "Unique.Key when unique_scope or unique_window is given",
		"Debounce":  "debounce_key, debounce_mode, debounce_window and debounce_max_wait",
	}, func(j any) *errand.EnqueueOpts { return j.(*JobRequest).opts() })
}

// TestLaterJobFieldsAreEnqueueOpts holds a batch's callback and a
// workflow's job ([LaterJob]) to the options such a job may have.
func TestLaterJobFieldsAreEnqueueOpts(t *testing.T) {
	// errand gives such a job its id and enqueues it when its batch or
	// dependencies are done: it has no id, run-at or unique key.
	notLater := "a job errand enqueues later has a fixed id and no time or key of its own"
	checkFields(t, reflect.TypeFor[LaterJob](), map[string]string{
		"kind": "the args' kind", "args": "the args themselves",
	}, map[string]string{
		"ID": notLater, "FirstWins": notLater, "RunAt": notLater, "StartBy": notLater, "UniqueKey": notLater, "Unique": notLater, "Debounce": notLater,
		"Eager": "a job errand enqueues later starts once its batch or dependencies are done, never in its enqueue",
	}, func(j any) *errand.EnqueueOpts {
		_, opts, err := j.(*LaterJob).params("job", "", "")
		if err != nil {
			t.Fatal(err)
		}
		return opts
	})
}

// checkFields checks that jsonType's fields are EnqueueOpts' by name, but
// jsonOnly's and optsOnly's, and that a value of jsonType with every field
// set makes, through opts, options with every field set but optsOnly's.
func checkFields(t *testing.T, jsonType reflect.Type, jsonOnly, optsOnly map[string]string, opts func(any) *errand.EnqueueOpts) {
	t.Helper()
	optsType := reflect.TypeFor[errand.EnqueueOpts]()
	fields := map[string]bool{}
	for i := range jsonType.NumField() {
		name, _, _ := strings.Cut(jsonType.Field(i).Tag.Get("json"), ",")
		fields[name] = true
		if _, ok := optsType.FieldByName(goName(name)); !ok && jsonOnly[name] == "" {
			t.Errorf("JSON field %q is no errand.EnqueueOpts field (%s): add the option, or say why not in this test", name, goName(name))
		}
	}
	for i := range optsType.NumField() {
		name := optsType.Field(i).Name
		if !fields[snake(name)] && optsOnly[name] == "" {
			t.Errorf("errand.EnqueueOpts.%s has no JSON field %q: add it, or say why not in this test", name, snake(name))
		}
	}
	j := reflect.New(jsonType)
	setAll(j.Elem())
	o := reflect.ValueOf(opts(j.Interface())).Elem()
	for i := range optsType.NumField() {
		if name := optsType.Field(i).Name; o.Field(i).IsZero() && optsOnly[name] == "" {
			t.Errorf("a job with every JSON field set leaves errand.EnqueueOpts.%s unset: map %q to it", name, snake(name))
		}
	}
}

// setAll sets every field of v to a value that is not zero.
func setAll(v reflect.Value) {
	switch {
	case v.Type() == reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)))
	case v.Type() == reflect.TypeFor[json.RawMessage]():
		v.Set(reflect.ValueOf(json.RawMessage(`{"n": 1}`)))
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			setAll(v.Field(i))
		}
	case v.Kind() == reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		setAll(v.Elem())
	case v.Kind() == reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		setAll(v.Index(0))
	case v.Kind() == reflect.String:
		v.SetString("x")
	case v.Kind() == reflect.Bool:
		v.SetBool(true)
	case v.CanInt():
		v.SetInt(1)
	case v.CanUint():
		v.SetUint(1)
	default:
		panic("setAll: no value for " + v.Type().String())
	}
}

// snake is the JSON name of a Go field: MaxAttempts is max_attempts, ID id.
func snake(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) && i > 0 && !unicode.IsUpper(rune(name[i-1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// goName is the Go name of a JSON field: max_attempts is MaxAttempts, id ID.
func goName(name string) string {
	if name == "id" {
		return "ID"
	}
	parts := strings.Split(name, "_")
	for i, p := range parts {
		parts[i] = strings.ToUpper(p[:1]) + p[1:]
	}
	return strings.Join(parts, "")
}
