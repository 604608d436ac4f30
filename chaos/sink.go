package chaos

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/ncruces/go-sqlite3/driver" // registers "sqlite3"
)

// The sink is the jobs' one external effect: an HTTP endpoint that records
// every delivery, and applies each job's effect once, keyed by job id, in a
// SQLite file of its own. Its answer to a delivery is decided by the job's
// args (poison, fail_first) and by the nemesis (an outage answers 503), so a
// seed decides which jobs retry and die.
type sink struct {
	db     *sql.DB
	mu     sync.Mutex // one writer: the sink's own file
	srv    *http.Server
	url    string
	outage atomic.Bool
	slow   time.Duration
}

// delivery is what the sink was given, whoever delivered it.
type delivery struct {
	ID         string          `json:"id"`
	Kind       string          `json:"kind"`
	Args       json.RawMessage `json:"args"`
	Attempt    int             `json:"attempt"`
	LeaseToken string          `json:"lease_token"`
}

// jobArgs are the fields of a job's args the sink reads.
type jobArgs struct {
	Poison    bool `json:"poison"`
	FailFirst int  `json:"fail_first"`
	SlowMS    int  `json:"slow_ms"`
}

const sinkSchema = `
CREATE TABLE IF NOT EXISTS deliveries (
	n INTEGER PRIMARY KEY, job_id TEXT NOT NULL, kind TEXT NOT NULL, attempt INTEGER NOT NULL,
	lease_token TEXT NOT NULL, via TEXT NOT NULL, status INTEGER NOT NULL, at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS deliveries_job ON deliveries (job_id);
CREATE TABLE IF NOT EXISTS effects (
	job_id TEXT PRIMARY KEY, kind TEXT NOT NULL, attempt INTEGER NOT NULL, lease_token TEXT NOT NULL,
	applied INTEGER NOT NULL DEFAULT 1);
CREATE TABLE IF NOT EXISTS outcomes (
	n INTEGER PRIMARY KEY, job_id TEXT NOT NULL, attempt INTEGER NOT NULL, lease_token TEXT NOT NULL,
	outcome TEXT NOT NULL, ok INTEGER NOT NULL, stale INTEGER NOT NULL, code TEXT NOT NULL);
`

func openSink(path string) (*sink, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	db, err := sql.Open("sqlite3", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open the sink's database %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(sinkSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("create the sink's tables in %s: %w", path, err)
	}
	return &sink{db: db}, nil
}

// serve starts the sink's HTTP server on a free loopback port.
func (s *sink) serve() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen for the sink: %w", err)
	}
	s.url = "http://" + ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /deliver", func(w http.ResponseWriter, r *http.Request) {
		var d delivery
		b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err == nil {
			err = json.Unmarshal(b, &d)
		}
		if err != nil || d.ID == "" {
			http.Error(w, "bad envelope", http.StatusBadRequest)
			return
		}
		via := r.URL.Query().Get("via")
		if via == "" {
			via = "webhook"
		}
		status, err := s.deliver(r.Context(), &d, via)
		if err != nil {
			// Not recorded: the worker must retry, as with any 5xx.
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(status)
		fmt.Fprintf(w, "sink answered %d for %s attempt %d\n", status, d.ID, d.Attempt)
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	return nil
}

// deliver decides the answer to a delivery and records it durably before
// answering: an answer the worker acts on is never lost by the sink.
func (s *sink) deliver(ctx context.Context, d *delivery, via string) (int, error) {
	var a jobArgs
	_ = json.Unmarshal(d.Args, &a) // non-object args are plain successes
	if a.SlowMS > 0 {
		select {
		case <-time.After(time.Duration(a.SlowMS) * time.Millisecond):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	status := http.StatusOK
	switch {
	case s.outage.Load():
		status = http.StatusBadGateway
	case a.Poison:
		status = http.StatusUnprocessableEntity
	case d.Attempt <= a.FailFirst:
		status = http.StatusInternalServerError
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`INSERT INTO deliveries (job_id, kind, attempt, lease_token, via, status, at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		d.ID, d.Kind, d.Attempt, d.LeaseToken, via, status, time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		return 0, err
	}
	if status == http.StatusOK {
		// Idempotent: a redelivery of an applied job applies nothing.
		if _, err := tx.Exec(`INSERT INTO effects (job_id, kind, attempt, lease_token) VALUES (?, ?, ?, ?) ON CONFLICT (job_id) DO UPDATE SET applied = applied`,
			d.ID, d.Kind, d.Attempt, d.LeaseToken); err != nil {
			return 0, err
		}
	}
	return status, tx.Commit()
}

// recordOutcome records what a remote worker's ack or fail got back; stale
// marks one sent after the worker had stalled past its lease, which errand
// must refuse (lease_lost).
func (s *sink) recordOutcome(id string, attempt int, token, outcome string, ok, stale bool, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.db.Exec(`INSERT INTO outcomes (job_id, attempt, lease_token, outcome, ok, stale, code) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		id, attempt, token, outcome, ok, stale, code)
	return err
}

func (s *sink) close() {
	if s.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s.srv.Shutdown(ctx)
		cancel()
	}
	s.db.Close()
}

// sinkView is what the invariants read from the sink.
type sinkView struct {
	deliveries  map[string]int            // job id -> deliveries
	tokens      map[string]map[string]int // job id -> distinct lease tokens delivered
	effects     map[string]int            // job id -> effect rows (at most 1 by the key)
	acksOK      map[string][]int          // job id -> attempts of successful remote acks
	staleAckOK  map[string]int            // job id -> late outcomes that were recorded
	staleAcks   int
	staleFenced int
}

func (s *sink) read(ctx context.Context) (*sinkView, error) {
	v := &sinkView{deliveries: map[string]int{}, tokens: map[string]map[string]int{}, effects: map[string]int{},
		acksOK: map[string][]int{}, staleAckOK: map[string]int{}}
	rows, err := s.db.QueryContext(ctx, `SELECT job_id, lease_token FROM deliveries`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id, tok string
		if err := rows.Scan(&id, &tok); err != nil {
			rows.Close()
			return nil, err
		}
		v.deliveries[id]++
		if v.tokens[id] == nil {
			v.tokens[id] = map[string]int{}
		}
		v.tokens[id][tok]++
	}
	rows.Close()
	rows, err = s.db.QueryContext(ctx, `SELECT job_id FROM effects`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		v.effects[id]++
	}
	rows.Close()
	rows, err = s.db.QueryContext(ctx, `SELECT job_id, attempt, outcome = 'ack', ok, stale FROM outcomes`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var attempt int
		var ack, ok, stale bool
		if err := rows.Scan(&id, &attempt, &ack, &ok, &stale); err != nil {
			return nil, err
		}
		if ok && ack {
			v.acksOK[id] = append(v.acksOK[id], attempt)
		}
		if stale {
			v.staleAcks++
			if ok {
				v.staleAckOK[id]++
			} else {
				v.staleFenced++
			}
		}
	}
	return v, rows.Err()
}

func itoa(n int) string { return strconv.Itoa(n) }
