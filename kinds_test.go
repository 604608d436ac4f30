package errand_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// greetArgs is at version 2: version 1 named the person "who".
type greetArgs struct {
	Name  string `json:"name"`
	Greet string `json:"greet"`
}

func (greetArgs) Kind() string     { return "greet" }
func (greetArgs) ArgsVersion() int { return 2 }

func (greetArgs) UpgradeArgs(from int, args json.RawMessage) (json.RawMessage, error) {
	if from != 1 {
		return nil, errors.New("no upgrade path")
	}
	var v1 struct {
		Who string `json:"who"`
	}
	if err := json.Unmarshal(args, &v1); err != nil {
		return nil, err
	}
	return json.Marshal(greetArgs{Name: v1.Who, Greet: "hello"})
}

// A typed handler decodes its args type, upgrading older versions and
// dead-lettering newer ones and args that do not decode, without running.
func TestHandleDecodesVersionedArgs(t *testing.T) {
	ctx := t.Context()
	st := openStore(t, nil)
	var got []greetArgs
	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args greetArgs) error {
		got = append(got, args)
		return nil
	}, nil)
	c := newClient(t, st, &errand.Config{Kinds: kinds})

	// A typed enqueue records the type's kind and version.
	r, err := c.Enqueue(ctx, greetArgs{Name: "ada", Greet: "hi"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Job.Kind != "greet" || r.Job.ArgsVersion != 2 || !sameJSON(r.Job.Args, `{"name":"ada","greet":"hi"}`) {
		t.Fatalf("enqueued %s version %d args %s", r.Job.Kind, r.Job.ArgsVersion, r.Job.Args)
	}
	if res := workOne(t, c, &errand.WorkOneOpts{}); res.Result != errand.ResultSucceeded || len(got) != 1 || got[0] != (greetArgs{"ada", "hi"}) {
		t.Fatalf("result %+v, handler got %+v", res, got)
	}

	tests := []struct {
		name    string
		version int
		args    string
		want    *greetArgs
		class   string
	}{
		{"upgraded", 1, `{"who":"bob"}`, &greetArgs{"bob", "hello"}, ""},
		{"newer", 3, `{"name":"x"}`, nil, errand.ClassUnknownVersion},
		{"undecodable", 2, `{"name": 7}`, nil, errand.ClassInvalidArgs},
		{"upgrade fails", 1, `[1]`, nil, errand.ClassInvalidArgs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got = nil
			if _, err := c.Enqueue(ctx, errand.RawArgs{KindName: "greet", JSON: json.RawMessage(tt.args), Version: tt.version}, nil); err != nil {
				t.Fatal(err)
			}
			res := workOne(t, c, &errand.WorkOneOpts{})
			if tt.want != nil {
				if res.Result != errand.ResultSucceeded || len(got) != 1 || got[0] != *tt.want {
					t.Fatalf("result %+v, got %+v; want %+v", res, got, *tt.want)
				}
				return
			}
			if res.Result != errand.ResultDead || res.Class != tt.class {
				t.Fatalf("result %+v; want dead with class %s", res, tt.class)
			}
			if len(got) != 0 {
				t.Fatalf("handler ran with %+v", got)
			}
			if tt.class == errand.ClassUnknownVersion && !strings.Contains(res.Error, "replay") {
				t.Fatalf("message %q does not say what to do", res.Error)
			}
		})
	}
}

func sameJSON(a json.RawMessage, b string) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal([]byte(b), &y) == nil && jsonEqual(x, y)
}

func jsonEqual(x, y any) bool {
	a, _ := json.Marshal(x)
	b, _ := json.Marshal(y)
	return string(a) == string(b)
}

// Mistakes in declaring kinds are returned by NewClient, naming the kind.
func TestKindsMistakes(t *testing.T) {
	st := openStore(t, nil)
	noop := func(context.Context, *errandtype.Job, greetArgs) error { return nil }
	for _, tt := range []struct {
		name  string
		build func(ks *errand.Kinds)
		want  string
	}{
		{"declared twice", func(ks *errand.Kinds) {
			errand.Handle(ks, noop, nil)
			errand.Declare[greetArgs](ks, nil)
		}, `kind "greet" is declared twice`},
		{"raw name with a space", func(ks *errand.Kinds) { ks.HandleRaw("send receipt", nil, nil) }, "space"},
		{"negative attempts", func(ks *errand.Kinds) { errand.Handle(ks, noop, &errand.KindOpts{MaxAttempts: -1}) }, "Kinds.greet.MaxAttempts"},
		{"negative timeout", func(ks *errand.Kinds) { errand.Handle(ks, noop, &errand.KindOpts{Timeout: -time.Second}) }, "Kinds.greet.Timeout"},
		{"unknown ordering choice", func(ks *errand.Kinds) { errand.Handle(ks, noop, &errand.KindOpts{OrderingOnDead: 9}) }, "Kinds.greet.OrderingOnDead"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ks := errand.NewKinds()
			tt.build(ks)
			_, err := errand.NewClient(st, &errand.Config{Kinds: ks})
			if !errors.Is(err, errandtype.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewClient = %v; want an input error mentioning %q", err, tt.want)
			}
		})
	}
}

// Subscribe delivers each recorded outcome, filtered by result when asked,
// so a test or a program waits for outcomes without polling.
func TestSubscribe(t *testing.T) {
	st := openStore(t, nil)
	c := handlerClient(t, st, func(ctx context.Context, job *errandtype.Job) error {
		if job.Attempt == 1 && strings.HasPrefix(job.ID, "flaky") {
			return errand.WithClass("flaky", errors.New("try again"))
		}
		return nil
	})
	all, cancelAll := c.Subscribe()
	defer cancelAll()
	retries, cancelRetries := c.Subscribe(errand.ResultRetrying)
	ok := enqueue(t, c, "task", &errand.EnqueueOpts{ID: "ok"})
	flaky := enqueue(t, c, "task", &errand.EnqueueOpts{ID: "flaky-1"})
	workOne(t, c, &errand.WorkOneOpts{})
	workOne(t, c, &errand.WorkOneOpts{})
	workOne(t, c, &errand.WorkOneOpts{}) // idle: no event

	for _, want := range []struct {
		id     string
		result errand.Result
	}{{ok.ID, errand.ResultSucceeded}, {flaky.ID, errand.ResultRetrying}} {
		e := <-all
		if e.Job == nil || e.Job.ID != want.id || e.Result != want.result || *e.JobID != want.id {
			t.Fatalf("event %+v; want %s %s", e, want.id, want.result)
		}
	}
	e := <-retries
	if e.Job.ID != flaky.ID || e.Class != "flaky" || e.AvailableAt == nil {
		t.Fatalf("retry event %+v; want the flaky job with its class and next run", e)
	}
	cancelRetries()
	if _, open := <-retries; open {
		t.Fatal("the channel is open after cancel")
	}
	cancelRetries() // idempotent
	select {
	case e := <-all:
		t.Fatalf("unexpected event %+v", e)
	default:
	}
}
