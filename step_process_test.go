package errand_test

// Durable steps survive real crashes: a worker process runs one job per
// crash point of a five-step handler, each job stopping at its point (before
// the first step, between two steps, after the last, and inside a step
// after its effect but before its record); the test SIGKILLs the process
// with every job at its point, and a second process, standing for another
// host, takes every job over once its lease expires.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// Environment of a step worker process.
const (
	envStepWorker = "ERRAND_TEST_STEP_WORKER" // "1" runs stepWorkerMain
	envStepStop   = "ERRAND_TEST_STEP_STOP"   // "1": each job stops at its point
)

const stepCount = 5

// stepArgs are a "flow" job's: where the first process stops it. At is the
// number of steps recorded before it stops; Inside stops it inside step At,
// after the step's effect and before its record.
type stepArgs struct {
	At     int  `json:"at"`
	Inside bool `json:"inside"`
}

// stepFlow is the five-step handler: each step writes its effect (a row
// naming the job and the step) and returns the sum so far, so the result
// shows that no step was skipped.
func stepFlow(db *chunkDB, stop bool) errand.HandlerFunc {
	return func(ctx context.Context, job *errandtype.Job) error {
		var args stepArgs
		if err := json.Unmarshal(job.Args, &args); err != nil {
			return errand.Permanent(err)
		}
		halt := func() {
			fmt.Printf("stopped %s\n", job.ID)
			select {} // until SIGKILL
		}
		sum := 0
		for i := range stepCount {
			if stop && args.At == i && !args.Inside {
				halt()
			}
			prev := sum
			v, err := errand.Step(ctx, fmt.Sprintf("step-%d", i), func(ctx context.Context) (int, error) {
				if _, err := db.db.ExecContext(ctx, `INSERT INTO `+db.table+` (n, pid) VALUES ($1, $2)`,
					stepRow(job.ID, i), os.Getpid()); err != nil {
					return 0, err
				}
				if stop && args.At == i && args.Inside {
					halt()
				}
				return prev + i + 1, nil
			})
			if err != nil {
				return err
			}
			sum = v
		}
		if stop && args.At == stepCount {
			halt()
		}
		return errand.SetOutput(ctx, sum)
	}
}

// stepRow numbers the effect of step i of job id: the job's point times
// ten, plus i.
func stepRow(id string, i int) int {
	var point int
	fmt.Sscanf(id, "point-%d", &point)
	return point*10 + i
}

// stepWorkerMain is a step worker process: a Worker with a lease of one
// second runs "flow" jobs until every one has finished, printing each
// stopped job's id; then it prints "done".
func stepWorkerMain() int {
	ctx := context.Background()
	st, db, err := openChunkStore(ctx, os.Getenv(envChunkDB), os.Getenv(envChunkSchema))
	if err != nil {
		fmt.Fprintln(os.Stderr, "step worker:", err)
		return 1
	}
	stop := os.Getenv(envStepStop) == "1"
	c, err := errand.NewClient(st, &errand.Config{Kinds: kindsOf([]testKind{{Name: "flow", Handler: stepFlow(db, stop)}})})
	if err != nil {
		fmt.Fprintln(os.Stderr, "step worker:", err)
		return 1
	}
	w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 20}, Lease: time.Second, PollInterval: 50 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, "step worker:", err)
		return 1
	}
	if err := w.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "step worker:", err)
		return 1
	}
	fmt.Println("ready")
	if stop {
		select {} // its jobs stop at their points, until SIGKILL
	}
	for {
		js, err := c.List(ctx, &errand.ListOpts{States: []errandtype.JobState{errandtype.StateQueued, errandtype.StateRetrying, errandtype.StateRunning}})
		if err == nil && len(js) == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := w.Stop(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "step worker:", err)
		return 1
	}
	fmt.Println("done")
	return 0
}

func startStepWorker(t *testing.T, dsn, schema string, stop bool) *chunkProc {
	flag := "0"
	if stop {
		flag = "1"
	}
	return startTestProcess(t, envStepWorker+"=1", envStepStop+"="+flag, envChunkDB+"="+dsn, envChunkSchema+"="+schema)
}

// TestStepsSurviveSIGKILL: with jobs stopped at every point between two
// steps (and inside one), a SIGKILL of their worker and a takeover by
// another process lose no step and run no recorded step again; a step
// killed after its effect and before its record runs again, once. On both
// stores.
func TestStepsSurviveSIGKILL(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			ctx := context.Background()
			dsn, schema, st, db := sharedStore(t, store)
			c := newClient(t, st, &errand.Config{Kinds: kindsOf([]testKind{{Name: "flow"}})})
			type point struct {
				id   string
				args stepArgs
			}
			var points []point
			for at := 0; at <= stepCount; at++ {
				points = append(points, point{fmt.Sprintf("point-%d", len(points)), stepArgs{At: at}})
			}
			for _, at := range []int{0, 2, stepCount - 1} {
				points = append(points, point{fmt.Sprintf("point-%d", len(points)), stepArgs{At: at, Inside: true}})
			}
			for _, p := range points {
				if _, err := c.Enqueue(ctx, rawArgs(t, "flow", p.args), &errand.EnqueueOpts{ID: p.id}); err != nil {
					t.Fatal(err)
				}
			}

			first := startStepWorker(t, dsn, schema, true)
			for range points {
				line, err := first.out.ReadString('\n')
				if err != nil || !strings.HasPrefix(line, "stopped ") {
					t.Fatalf("first worker: %q, %v; stderr:\n%s", line, err, first.stderr.String())
				}
			}
			first.kill(t)
			recordedAtKill := map[string]int{}
			for _, p := range points {
				steps, err := c.Steps(ctx, p.id)
				if err != nil {
					t.Fatal(err)
				}
				recordedAtKill[p.id] = len(steps)
				if len(steps) != p.args.At {
					t.Errorf("%s %+v: %d steps recorded at the kill, want %d", p.id, p.args, len(steps), p.args.At)
				}
			}

			second := startStepWorker(t, dsn, schema, false)
			// Killed past a minute, so a job that never finishes fails the
			// test instead of hanging it.
			timer := time.AfterFunc(time.Minute, func() { _ = second.cmd.Process.Kill() })
			defer timer.Stop()
			if line, err := second.out.ReadString('\n'); err != nil || line != "done\n" {
				t.Fatalf("second worker (a minute at most): %q, %v; stderr:\n%s", line, err, second.stderr.String())
			}
			if err := second.cmd.Wait(); err != nil {
				t.Fatalf("second worker: %v; stderr:\n%s", err, second.stderr.String())
			}

			runs := map[int]int{}
			rows, err := db.db.QueryContext(ctx, `SELECT n FROM `+db.table)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var n int
				if err := rows.Scan(&n); err != nil {
					t.Fatal(err)
				}
				runs[n]++
			}
			rows.Close()
			for _, p := range points {
				j := getJob(t, c, p.id)
				var sum int
				if err := json.Unmarshal(j.Output, &sum); j.State != errandtype.StateSucceeded || err != nil || sum != 15 {
					t.Errorf("%s %+v: %s, output %s; want succeeded with 15 (1+2+3+4+5: no step skipped)", p.id, p.args, j.State, j.Output)
				}
				if j.Attempt != 2 || len(j.Errors) != 1 || j.Errors[0].Class != "lease_expired" {
					t.Errorf("%s: attempt %d, history %+v; want succeeded on attempt 2 after lease_expired", p.id, j.Attempt, j.Errors)
				}
				for i := range stepCount {
					want := 1
					if p.args.Inside && i == p.args.At {
						want = 2 // its effect was written, its record was not
					}
					if got := runs[stepRow(p.id, i)]; got != want {
						t.Errorf("%s %+v: step %d ran %d times, want %d", p.id, p.args, i, got, want)
					}
				}
				steps, err := c.Steps(ctx, p.id)
				if err != nil || len(steps) != stepCount {
					t.Errorf("%s: %d steps recorded (%v), want %d", p.id, len(steps), err, stepCount)
				}
				for i, s := range steps {
					wantAttempt := 2
					if i < recordedAtKill[p.id] {
						wantAttempt = 1
					}
					if s.Attempt != wantAttempt {
						t.Errorf("%s: step %d recorded by attempt %d, want %d", p.id, i, s.Attempt, wantAttempt)
					}
				}
			}
		})
	}
}
