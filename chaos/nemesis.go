package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/errandhq/errand"
)

const sigcont = syscall.SIGCONT

// step is one fault of the nemesis's schedule: at offset at, fault kind on
// the target numbered which.
type step struct {
	at    time.Duration
	kind  string
	which int
}

// supported lists the enabled faults this target can take, in FaultKinds
// order, recording why the others are left out.
func (r *run) supported() []string {
	var out []string
	for _, k := range FaultKinds {
		if !r.enabled(k) {
			continue
		}
		why := ""
		switch k {
		case "db_restart":
			if pg, ok := r.target.(*postgresTarget); !ok || pg.topo == nil {
				why = r.target.Restart(context.Background()).Error()
			}
		case "db_terminate":
			if _, ok := r.target.(*postgresTarget); !ok {
				why = r.target.Terminate(context.Background()).Error()
			}
		case "conn_cut":
			if _, ok := r.target.(*postgresTarget); !ok {
				why = "SQLite has no connections to cut"
			}
		case "stall_remote":
			if len(r.remotes) == 0 {
				why = "no remote workers"
			}
		case "replay_race", "cancel_race", "duplicate_enqueue", "poison":
			continue // the load and the operators inject these
		}
		if s, ok := r.skipped[k]; ok && why == "" {
			why = s
		}
		if why != "" {
			r.skipped[k] = why
			continue
		}
		out = append(out, k)
	}
	return out
}

// plan is the nemesis's schedule, from the seed alone: a fault every 2 to 5
// seconds, the first after 3, the kinds in a shuffled order each round.
func (r *run) plan() []step {
	kinds := r.supported()
	if len(kinds) == 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(r.cfg.Seed, 3))
	var plan []step
	var round []int
	for at := 3 * time.Second; at < r.cfg.Duration-2*time.Second; at += time.Duration(2000+rng.IntN(3000)) * time.Millisecond {
		if len(round) == 0 {
			round = rng.Perm(len(kinds)) // every kind once a round, so a short run has them all
		}
		plan = append(plan, step{at: at, kind: kinds[round[0]], which: rng.IntN(1 << 20)})
		round = round[1:]
	}
	return plan
}

// nemesis injects the plan's faults one at a time; a fault that outlasts
// the gap to the next delays it.
func (r *run) nemesis(ctx context.Context, plan []step) {
	start := time.Now()
	for _, s := range plan {
		if d := time.Until(start.Add(s.at)); d > 0 {
			sleepCtx(ctx, d)
		}
		if ctx.Err() != nil {
			return
		}
		if err := r.inject(ctx, s); err != nil {
			r.logf("fault %s: %v", s.kind, err)
			r.count("fault_errors")
			continue
		}
		r.fault(s.kind)
	}
}

func (r *run) inject(ctx context.Context, s step) error {
	lease := r.cfg.Lease
	switch s.kind {
	case "kill_worker":
		w := r.workers[s.which%len(r.workers)]
		w.kill()
		sleepCtx(ctx, time.Second)
		return w.start()
	case "stop_worker":
		// Longer than the lease: its jobs are swept and run elsewhere, and
		// its own outcomes, once it resumes, must be fenced.
		w := r.workers[s.which%len(r.workers)]
		if err := w.signal(syscall.SIGSTOP); err != nil {
			return err
		}
		sleepCtx(context.WithoutCancel(ctx), lease+lease/2+time.Second)
		return w.signal(syscall.SIGCONT)
	case "kill_server":
		r.server.kill()
		sleepCtx(ctx, 500*time.Millisecond)
		if err := r.server.start(); err != nil {
			return err
		}
		return r.waitServe()
	case "stall_remote":
		for _, w := range r.remotes { // each stalls on its next job
			w.stall.Add(1)
		}
		return nil
	case "sink_outage":
		r.sink.outage.Store(true)
		sleepCtx(context.WithoutCancel(ctx), 2*time.Second)
		r.sink.outage.Store(false)
		return nil
	case "db_restart":
		return r.target.Restart(ctx)
	case "db_terminate":
		return r.target.Terminate(ctx)
	case "conn_cut":
		r.target.(*postgresTarget).proxy.cut()
		return nil
	case "disk_full":
		if err := fillDisk(r.target.(*sqliteTarget).disk); err != nil {
			fillerRemove(r)
			return err
		}
		r.burst(context.WithoutCancel(ctx), 3*time.Second)
		fillerRemove(r)
		return nil
	case "clock_skew":
		if err := r.skew.start(); err != nil {
			return err
		}
		sleepCtx(context.WithoutCancel(ctx), 6*time.Second)
		r.skew.stop(10 * time.Second)
		return nil
	}
	return errors.New("unknown fault")
}

// fillDisk writes a file to dir until the file system is full.
func fillDisk(dir string) error {
	f, err := os.OpenFile(filepath.Join(dir, "filler"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return nil
			}
			return err
		}
	}
}

func fillerRemove(r *run) {
	if t, ok := r.target.(*sqliteTarget); ok && t.disk != "" {
		os.Remove(filepath.Join(t.disk, "filler"))
	}
}

// burst enqueues jobs with large args for d, so that a full disk refuses
// writes (the WAL must grow) rather than going unnoticed. Refused enqueues
// are not logged; accepted ones are owed like any other.
func (r *run) burst(ctx context.Context, d time.Duration) {
	pad := strings.Repeat("x", 32<<10)
	end := time.Now().Add(d)
	for n := 0; time.Now().Before(end); n++ {
		args, _ := json.Marshal(map[string]any{"pad": pad, "n": n})
		res, err := r.client.Enqueue(ctx, errand.RawArgs{KindName: "chaos_ok", JSON: args},
			&errand.EnqueueOpts{MaxAttempts: 3, BackoffBase: backoffBase, BackoffMax: backoffMax})
		if err != nil {
			// ENOSPC reaches SQLite's WAL as SQLITE_FULL or SQLITE_IOERR.
			if msg := err.Error(); strings.Contains(msg, "full") || strings.Contains(msg, "disk I/O error") {
				r.count("disk_full_refusals")
			} else {
				r.count("enqueue_errors")
				r.logf("enqueue on a full disk: %v", err)
			}
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		if err := r.log.append(logEntry{ID: res.Job.ID, Kind: "chaos_ok", MaxAttempts: 3, Digest: digest(args), Via: "client"}); err != nil {
			return
		}
		r.count("enqueued")
	}
}
