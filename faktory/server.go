package faktory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// Defaults of [Options].
const (
	DefaultMaxLineBytes     = 1 << 20
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultLineTimeout      = 30 * time.Second
	DefaultIdleTimeout      = time.Hour
	DefaultWriteTimeout     = 30 * time.Second
	DefaultFetchWait        = 2 * time.Second
	DefaultPollInterval     = 500 * time.Millisecond
)

// ErrServerClosed is what [Server.Serve] returns once [Server.Shutdown] or
// [Server.Close] was called.
var ErrServerClosed = errors.New("faktory: server closed")

// Options configure a [Server]. The zero value serves without a password
// with the defaults above.
type Options struct {
	// Password, when set, is the password every client must prove in its
	// HELLO (Faktory's salted, iterated SHA-256). Required on any address
	// other clients can reach.
	Password string
	// Logger receives a line per refused connection and per internal
	// error. Nil discards.
	Logger *slog.Logger
	// MaxLineBytes bounds one command line, the job or jobs it carries
	// included. Default DefaultMaxLineBytes (1 MiB).
	MaxLineBytes int
	// HandshakeTimeout is how long a new connection has to send a valid
	// HELLO. Default DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// LineTimeout is how long a command line may take to arrive once its
	// first byte has. Default DefaultLineTimeout.
	LineTimeout time.Duration
	// IdleTimeout closes, without an answer, a connection that sends no
	// command for that long. Default DefaultIdleTimeout. Faktory has no
	// such limit and some clients keep pooled connections open for long:
	// give it room.
	IdleTimeout time.Duration
	// WriteTimeout bounds writing one answer to a client that does not
	// read. Default DefaultWriteTimeout.
	WriteTimeout time.Duration
	// FetchWait is how long a FETCH waits for a job before it answers
	// null. Default DefaultFetchWait (Faktory's 2 s).
	FetchWait time.Duration
	// PollInterval is how often a waiting FETCH looks for jobs that were
	// not pushed through this server (enqueued by errand's API, a Go
	// producer, a retry coming due). A PUSH here wakes it at once.
	// Default DefaultPollInterval.
	PollInterval time.Duration
}

// withDefaults returns o with its zero fields set to their defaults.
func (o Options) withDefaults() Options {
	set := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	if o.MaxLineBytes == 0 {
		o.MaxLineBytes = DefaultMaxLineBytes
	}
	set(&o.HandshakeTimeout, DefaultHandshakeTimeout)
	set(&o.LineTimeout, DefaultLineTimeout)
	set(&o.IdleTimeout, DefaultIdleTimeout)
	set(&o.WriteTimeout, DefaultWriteTimeout)
	set(&o.FetchWait, DefaultFetchWait)
	set(&o.PollInterval, DefaultPollInterval)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// check refuses options no server can run with.
func (o *Options) check() error {
	if o.MaxLineBytes != 0 && o.MaxLineBytes < 1024 {
		return &errandtype.InputError{Field: "MaxLineBytes", Message: fmt.Sprintf("%d is too small; give at least 1024 bytes, or 0 for %d", o.MaxLineBytes, DefaultMaxLineBytes)}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"HandshakeTimeout", o.HandshakeTimeout}, {"LineTimeout", o.LineTimeout}, {"IdleTimeout", o.IdleTimeout},
		{"WriteTimeout", o.WriteTimeout}, {"FetchWait", o.FetchWait}, {"PollInterval", o.PollInterval}} {
		if d.v < 0 {
			return &errandtype.InputError{Field: d.name, Message: "is negative; give a positive duration, or 0 for the default"}
		}
	}
	return nil
}

// jobs is what the server needs of an *errand.Client, whatever its
// transaction type.
type jobs interface {
	EnqueueMany(ctx context.Context, params []errand.EnqueueParams) ([]errand.EnqueueResult, error)
	Claim(ctx context.Context, opts *errand.ClaimOpts) ([]*errandtype.Job, error)
	Heartbeat(ctx context.Context, id, token string, lease time.Duration) (time.Time, error)
	Ack(ctx context.Context, id, token string) (errandstore.OutcomeResult, error)
	Fail(ctx context.Context, id, token string, opts *errand.FailOpts) (errandstore.OutcomeResult, error)
	Snooze(ctx context.Context, id, token string, d time.Duration) (errandstore.OutcomeResult, error)
	Stats(ctx context.Context) ([]errandtype.QueueStats, error)
}

// Server serves Faktory's protocol on the listeners given to
// [Server.Serve]. Stop it with [Server.Shutdown], which tells workers to
// terminate, or [Server.Close].
type Server struct {
	jobs    jobs
	opts    Options
	log     *slog.Logger
	started time.Time

	res    reservations
	pushed broadcast // fired by each PUSH, so that waiting FETCHes look at once

	// base is the context of every command; cancelled by Close.
	base   context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	draining  chan struct{} // closed when Shutdown or Close begins
	stopping  bool
	wg        sync.WaitGroup // connections being served

	commands atomic.Int64 // served, for INFO
}

// NewServer returns a server of c's jobs. c may be any *errand.Client: it
// enqueues any kind a Faktory client pushes, so build it with
// AllowUnknownKinds when it declares kinds.
func NewServer[TTx any](c *errand.Client[TTx], opts *Options) (*Server, error) {
	if c == nil {
		return nil, &errandtype.InputError{Field: "client", Message: "is nil; pass the *errand.Client whose jobs to serve"}
	}
	return newServer(c, opts)
}

func newServer(j jobs, opts *Options) (*Server, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	base, cancel := context.WithCancel(context.Background())
	return &Server{
		jobs: j, opts: o, log: o.Logger, started: time.Now(),
		base: base, cancel: cancel,
		listeners: map[net.Listener]struct{}{},
		conns:     map[*conn]struct{}{},
		draining:  make(chan struct{}),
	}, nil
}

// Serve accepts connections on ln and serves each in its own goroutine
// until Shutdown or Close, then returns ErrServerClosed. It closes ln.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
		ln.Close()
	}()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isStopping() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond) // out of file descriptors, say: let some close
				continue
			}
			return fmt.Errorf("faktory: accept: %w", err)
		}
		c := newConn(s, nc)
		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			nc.Close()
			return ErrServerClosed
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer s.forget(c)
			c.serve()
		}()
	}
}

func (s *Server) isStopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopping
}

func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// isDraining reports whether Shutdown or Close has begun.
func (s *Server) isDraining() bool {
	select {
	case <-s.draining:
		return true
	default:
		return false
	}
}

// beginStop stops accepting connections and starts the drain.
func (s *Server) beginStop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopping {
		s.stopping = true
		close(s.draining)
	}
	for ln := range s.listeners {
		ln.Close()
	}
}

// Shutdown stops accepting connections, answers every worker's next BEAT
// with {"state":"terminate"} and every FETCH with no job, and waits, until
// ctx ends, for the workers still connected to ACK or FAIL the jobs they
// hold. Then it closes every connection and waits for their goroutines. A
// job still reserved then is not lost: its lease ends and errand hands it
// out again. It returns ctx's error when ctx ended first.
func (s *Server) Shutdown(ctx context.Context) error {
	s.beginStop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var err error
	for s.res.busy(time.Now()) && err == nil {
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-tick.C:
		}
	}
	s.Close()
	return err
}

// Close closes every listener and connection at once and waits for the
// connections' goroutines. It is idempotent.
func (s *Server) Close() error {
	s.beginStop()
	s.cancel()
	s.mu.Lock()
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// broadcast wakes every waiter at once: fire closes the channel that wait
// returned and makes a new one.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func (b *broadcast) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

func (b *broadcast) fire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}
