package errand_test

import (
	"context"
	"database/sql"
	"reflect"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

func TestWorkerRecordHandles(t *testing.T) {
	worker := func(status errandtype.WorkerStatus, kinds ...string) *errandtype.WorkerRecord {
		return &errandtype.WorkerRecord{ID: "w", Status: status, Kinds: kinds,
			Queues: []errandtype.WorkerQueue{{Name: "default", Concurrency: 1}, {Name: "mail", Concurrency: 1}}}
	}
	tests := []struct {
		name        string
		w           *errandtype.WorkerRecord
		queue, kind string
		want        bool
	}{
		{"alive, its queue and kind", worker(errandtype.WorkerAlive, "export_order", "send"), "mail", "send", true},
		{"a kind it has no handler for", worker(errandtype.WorkerAlive, "export_order"), "default", "export_ordr", false},
		{"a queue it does not run", worker(errandtype.WorkerAlive, "send"), "reports", "send", false},
		{"draining", worker(errandstore.WorkerDraining, "send"), "mail", "send", false},
		{"stopped", worker(errandstore.WorkerStopped, "send"), "mail", "send", false},
		{"gone", worker(errandstore.WorkerGone, "send"), "mail", "send", false},
		{"kinds not recorded", worker(errandtype.WorkerAlive), "mail", "anything", true},
		{"kinds not recorded, another queue", worker(errandtype.WorkerAlive), "reports", "anything", false},
	}
	for _, tt := range tests {
		if got := tt.w.Handles(tt.queue, tt.kind); got != tt.want {
			t.Errorf("%s: Handles(%s, %s) = %v, want %v", tt.name, tt.queue, tt.kind, got, tt.want)
		}
		if got := errand.KindHandled([]*errandtype.WorkerRecord{worker(errandstore.WorkerStopped, "x"), tt.w}, tt.queue, tt.kind); got != tt.want {
			t.Errorf("%s: KindHandled = %v, want %v", tt.name, got, tt.want)
		}
	}
	if errand.KindHandled(nil, "default", "send") {
		t.Error("KindHandled with no workers = true")
	}
}

func TestAssembleQueueStats(t *testing.T) {
	got := errandstore.AssembleQueueStats([]errandstore.QueueCount{
		{Queue: "b", State: errandtype.StateQueued, Kind: "x", Jobs: 2, OldestReadyAgeSeconds: 5},
		{Queue: "a", State: errandtype.StateDead, Kind: "x", Jobs: 1},
		{Queue: "b", State: errandtype.StateRetrying, Kind: "x", Jobs: 1, OldestReadyAgeSeconds: 9},
		{Queue: "b", State: errandtype.StateQueued, Kind: "y", Jobs: 4},
		{Queue: "b", State: errandtype.StateSucceeded, Kind: "z", Jobs: 7},
	})
	counts := func(queued, running, retrying, succeeded, dead, cancelled int) map[errandtype.JobState]int {
		return map[errandtype.JobState]int{
			errandtype.StateQueued: queued, errandtype.StateRunning: running, errandtype.StateRetrying: retrying,
			errandtype.StateSucceeded: succeeded, errandtype.StateDead: dead, errandtype.StateCancelled: cancelled,
		}
	}
	want := []errandtype.QueueStats{
		{Queue: "a", Counts: counts(0, 0, 0, 0, 1, 0), Dead: 1, WaitingByKind: map[string]int{}, ReadyAgeByKind: map[string]float64{}},
		{Queue: "b", Counts: counts(6, 0, 1, 7, 0, 0), OldestReadyAgeSeconds: 9, WaitingByKind: map[string]int{"x": 3, "y": 4},
			ReadyAgeByKind: map[string]float64{"x": 9}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("AssembleQueueStats:\n got %+v\nwant %+v", got, want)
	}
	if got := errandstore.AssembleQueueStats(nil); got == nil || len(got) != 0 {
		t.Errorf("AssembleQueueStats(nil) = %#v, want empty and non-nil", got)
	}
}

// TestStatsNamesUnhandledKinds: Stats names, per queue, the waiting kinds
// no live worker handles, from the registry: a misspelt kind, a queue no
// worker runs, and every kind once the only worker stops.
func TestStatsNamesUnhandledKinds(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		c := newClient(t, s, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{
			{Name: "export_order", Handler: errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil })},
		})})
		w, err := c.NewWorker(&errand.WorkerConfig{PollInterval: time.Hour, PollOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer w.Stop(ctx)
		producer := newClient(t, s, &errand.Config{})
		for range 3 {
			enqueue(t, producer, "export_ordr", nil)
		}
		enqueue(t, producer, "export_order", &errand.EnqueueOpts{Queue: "reports", Delay: time.Hour})

		unhandled := func() map[string][]errandtype.KindCount {
			stats, err := c.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			m := map[string][]errandtype.KindCount{}
			for _, q := range stats {
				if q.UnhandledKinds == nil {
					t.Errorf("queue %s: UnhandledKinds is nil, want a list", q.Queue)
				}
				m[q.Queue] = q.UnhandledKinds
			}
			return m
		}
		want := map[string][]errandtype.KindCount{
			"default": {{Kind: "export_ordr", Waiting: 3}},
			"reports": {{Kind: "export_order", Waiting: 1}},
		}
		if got := unhandled(); !reflect.DeepEqual(got, want) {
			t.Errorf("with a worker for export_order on default: unhandled %+v, want %+v", got, want)
		}

		// A handled kind waiting in the worker's queue is not named.
		enqueue(t, producer, "export_order", &errand.EnqueueOpts{Delay: time.Hour})
		if got := unhandled(); !reflect.DeepEqual(got, want) {
			t.Errorf("with a handled job waiting too: unhandled %+v, want %+v", got, want)
		}

		if err := w.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		want["default"] = []errandtype.KindCount{{Kind: "export_order", Waiting: 1}, {Kind: "export_ordr", Waiting: 3}}
		if got := unhandled(); !reflect.DeepEqual(got, want) {
			t.Errorf("after the worker stopped: unhandled %+v, want %+v", got, want)
		}
	})
}
