package errand_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// TestConfigBounds: values a worker, a schedule or a job once accepted and
// then spun on, hung on or stored as something else are refused when they
// are given, naming the field.
func TestConfigBounds(t *testing.T) {
	c := handlerClient(t, openStore(t, nil), func(context.Context, *errandtype.Job) error { return nil })
	refused := func(what string, err error, field string) {
		t.Helper()
		var ie *errandtype.InputError
		if !errors.As(err, &ie) || !strings.Contains(ie.Field, field) {
			t.Errorf("%s: %v, want an InputError naming %s", what, err, field)
		}
	}
	args := errand.RawArgs{KindName: "task"}

	// A tick between two microseconds was stored before itself and found
	// due again at once, in a loop.
	_, err := errand.NewSchedule("odd", "@every 1.0000005s", args, nil)
	refused("@every 1.0000005s", err, "spec")
	// The 30th of February never comes: stored with no next fire time,
	// the schedule failed on every turn of the scheduler.
	_, err = errand.NewSchedule("feb30", "0 0 30 2 *", args, nil)
	refused("0 0 30 2 *", err, "spec")
	// Longer than a store keeps: refused by the store on every retry of
	// the worker's registration of its schedules.
	long := "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59"
	_, err = errand.NewSchedule("long", long+" "+long+" * * * *", args, nil)
	refused("a spec of 347 bytes", err, "spec")
	for _, ok := range []string{"@every 1.5s", "0 9 29 2 *", "@hourly"} {
		if _, err := errand.NewSchedule("ok", ok, args, nil); err != nil {
			t.Errorf("NewSchedule(%q): %v", ok, err)
		}
	}

	// A retention interval of a nanosecond pruned in a tight loop.
	_, err = c.NewWorker(&errand.WorkerConfig{Retention: &errand.RetentionPolicy{SucceededAge: time.Hour, Interval: time.Nanosecond}})
	refused("Retention.Interval 1ns", err, "Retention.Interval")
	// A kind kept a month whose dead jobs would go after a day, the default.
	_, err = c.NewWorker(&errand.WorkerConfig{Retention: &errand.RetentionPolicy{DeadAge: 24 * time.Hour,
		Kinds: map[string]errand.KindRetention{"task": {SucceededAge: 720 * time.Hour}}}})
	refused("a kind's dead jobs kept shorter than its succeeded ones", err, "Retention.kinds[task].dead_age")

	// MaxWorkers handed out one slot at a time (a billion took longer
	// than a test waits), and a concurrency past 32 bits asked the rate
	// limiter for more tokens than it takes.
	_, err = c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{"default": errand.MaxConcurrency + 1}})
	refused("concurrency past MaxConcurrency", err, "Queues")
	_, err = c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{"default": 10}, MaxWorkers: errand.MaxConcurrency + 1})
	refused("MaxWorkers past MaxConcurrency", err, "MaxWorkers")
	if _, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{"default": errand.MaxConcurrency}, MaxWorkers: errand.MaxConcurrency}); err != nil {
		t.Errorf("NewWorker at MaxConcurrency: %v", err)
	}

	// A backoff under a microsecond was stored as none: the default.
	for _, o := range []*errand.EnqueueOpts{{BackoffBase: 500 * time.Nanosecond}, {BackoffMax: 999 * time.Microsecond}} {
		refused("a backoff under 1ms", errand.CheckEnqueue(args, o), "backoff")
		_, err := c.Enqueue(context.Background(), args, o)
		refused("a backoff under 1ms, enqueued", err, "backoff")
	}

	// A lease of days left a crashed worker's job waiting for days.
	_, err = c.NewWorker(&errand.WorkerConfig{Lease: errand.MaxLease + time.Second})
	refused("a lease past MaxLease", err, "Lease")
	_, err = c.WorkOne(context.Background(), &errand.WorkOneOpts{Lease: 100 * time.Hour})
	refused("WorkOne with a lease past MaxLease", err, "lease")
	if _, err := c.NewWorker(&errand.WorkerConfig{Lease: errand.MaxLease}); err != nil {
		t.Errorf("NewWorker with MaxLease: %v", err)
	}

	// A unique window longer than the time since 1970 started at the
	// epoch, which the stores keep as no window: the job read back
	// without one.
	u := &errand.EnqueueOpts{Unique: &errand.UniqueOpts{Key: "k", Window: 100 * 365 * 24 * time.Hour}}
	refused("a unique window of a century", errand.CheckEnqueue(args, u), "unique_window")
	_, err = c.Enqueue(context.Background(), args, u)
	refused("a unique window of a century, enqueued", err, "unique_window")
	u.Unique.Window = errandstore.MaxUniqueWindow
	if r, err := c.Enqueue(context.Background(), args, u); err != nil || r.Job.UniqueWindowStart == nil {
		t.Errorf("a unique window of MaxUniqueWindow: %+v %v, want a window start", r, err)
	}

	// A negative retry policy fell back to the defaults without a word,
	// and a Max below Base was raised to Base.
	st := openStore(t, nil)
	for name, p := range map[string]*errand.RetryPolicy{
		"negative base":              {Base: -time.Second},
		"negative max":               {Max: -time.Second},
		"base under 1ms":             {Base: time.Microsecond},
		"max under base":             {Base: time.Minute, Max: time.Second},
		"max under the default base": {Max: 100 * time.Millisecond},
	} {
		_, err := errand.NewClient(st, &errand.Config{RetryPolicy: p})
		refused("Config.RetryPolicy "+name, err, "RetryPolicy")
		ks := errand.NewKinds()
		ks.HandleRaw("task", nil, &errand.KindOpts{RetryPolicy: p})
		_, err = errand.NewClient(st, &errand.Config{Kinds: ks})
		refused("KindOpts.RetryPolicy "+name, err, "Kinds.task.RetryPolicy")
	}
	if _, err := errand.NewClient(st, &errand.Config{RetryPolicy: &errand.RetryPolicy{Base: 2 * time.Hour}}); err != nil {
		t.Errorf("a Base past the default Max: %v", err)
	}

	// A snooze under a microsecond made the job available at once, where
	// a snooze of zero waits a millisecond.
	for _, d := range []time.Duration{0, time.Nanosecond, 500 * time.Nanosecond, 999 * time.Microsecond} {
		var je *errand.JobError
		if !errors.As(errand.Snooze(d), &je) || je.SnoozeDelay() != time.Millisecond {
			t.Errorf("Snooze(%s) snoozes %v, want 1ms", d, je)
		}
	}
}
