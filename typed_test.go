package errand_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/errandhq/errand"
)

type greetV2 struct {
	Name  string `json:"name"`
	Greet string `json:"greet"`
}

func TestTyped(t *testing.T) {
	var got []greetV2
	h := &errand.Typed[greetV2]{
		Version: 2,
		Upgrade: func(from int, args json.RawMessage) (json.RawMessage, error) {
			if from != 1 {
				return nil, errors.New("no upgrade path")
			}
			var v1 struct {
				Who string `json:"who"`
			}
			if err := json.Unmarshal(args, &v1); err != nil {
				return nil, err
			}
			return json.Marshal(greetV2{Name: v1.Who, Greet: "hello"})
		},
		Func: func(ctx context.Context, job *errand.Job, args greetV2) error {
			got = append(got, args)
			return nil
		},
	}
	tests := []struct {
		name    string
		version int
		args    string
		want    *greetV2
		class   string
	}{
		{"current", 2, `{"name":"ada","greet":"hi"}`, &greetV2{"ada", "hi"}, ""},
		{"upgraded", 1, `{"who":"bob"}`, &greetV2{"bob", "hello"}, ""},
		{"newer", 3, `{"name":"x"}`, nil, errand.ClassUnknownVersion},
		{"undecodable", 2, `{"name": 7}`, nil, errand.ClassInvalidArgs},
		{"upgrade fails", 1, `[1]`, nil, errand.ClassInvalidArgs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got = nil
			err := h.Work(context.Background(), &errand.Job{ID: "j", ArgsVersion: tt.version, Args: json.RawMessage(tt.args)})
			if tt.want != nil {
				if err != nil || len(got) != 1 || got[0] != *tt.want {
					t.Fatalf("err %v, got %+v; want %+v", err, got, *tt.want)
				}
				return
			}
			var je *errand.JobError
			if !errors.As(err, &je) || je.Class() != tt.class || !je.IsPermanent() {
				t.Fatalf("err %v (%+v); want permanent class %s", err, je, tt.class)
			}
			if len(got) != 0 {
				t.Fatalf("handler ran with %+v", got)
			}
			if tt.class == errand.ClassUnknownVersion && !strings.Contains(err.Error(), "replay") {
				t.Fatalf("message %q does not say what to do", err)
			}
		})
	}
}

func TestTypedThroughWorkOne(t *testing.T) {
	ctx := context.Background()
	s := openWorkerStore(t)
	c, err := errand.NewClient(s, errand.Config{Kinds: []errand.Kind{{
		Name: "greet",
		Handler: errand.WorkFunc(func(ctx context.Context, job *errand.Job, args greetV2) error {
			return nil
		}),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Enqueue(ctx, "greet", greetV2{Name: "x"}, &errand.EnqueueOpts{ArgsVersion: 2})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.WorkOne(ctx, errand.WorkOneOpts{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Result != errand.ResultDead || res.Class != errand.ClassUnknownVersion {
		t.Fatalf("result %+v, want dead with class unknown_version", res)
	}
	j, err := c.Get(ctx, r.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != errand.StateDead || j.Attempt != 1 {
		t.Fatalf("job %s attempt %d, want dead after one attempt", j.State, j.Attempt)
	}
}
