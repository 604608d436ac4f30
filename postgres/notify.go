package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/errandhq/errand/errandstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Wake-ups across processes go through LISTEN/NOTIFY on one channel per
// errand schema (see notifyChannel), the payload a queue name. Clients send
// them after the enqueue transaction commits, never inside it: a NOTIFY
// takes a cluster-wide lock at commit and halves group-commit throughput
// (docs/design.md, "Storage decisions"). Behind a pooler in transaction
// mode LISTEN does not work: Options.ListenURL then names the server itself.

var _ errandstore.Notifier = (*Store)(nil)

const (
	// listenerAppName is the application_name of the listener's connection,
	// so operators can tell it apart in pg_stat_activity. When the URL names
	// an application, the listener is that name with "/listener" added.
	listenerAppName = "errand-listener"
	// listenIdlePing is how long the listener waits in silence before it
	// checks its connection with a query. A connection dropped without a
	// word (a network partition, a NAT timeout) is otherwise noticed only
	// after TCP keepalive gives up, many minutes later.
	listenIdlePing = time.Minute
	// listenPingTimeout bounds that check.
	listenPingTimeout = 5 * time.Second
	// listenConnectTimeout bounds the listener's connection to each server
	// of the URL when the pool sets no connect timeout, so that a connect
	// lost in a partition is retried rather than awaited for the kernel's
	// minutes.
	listenConnectTimeout = 10 * time.Second
	// listenBackoffMin and listenBackoffMax bound the wait between attempts
	// to reconnect a dropped listener; it doubles from one to the other.
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second
	// listenProbeTimeout bounds the wait for the probe that checks a new
	// listening connection: delivery takes a millisecond or two, but a
	// loaded server must not be mistaken for a pooler.
	listenProbeTimeout = 5 * time.Second
	// listenMaxPending is the most distinct queue names the listener holds
	// for a slow reader; past it they collapse into "" (every queue).
	listenMaxPending = 1000
)

// notifyChannel is the LISTEN/NOTIFY channel of the errand schema named
// schema: "errand_jobs_" and the schema's name, so that deployments in
// different schemas of one database do not wake each other. A name that would
// pass PostgreSQL's 63-byte identifier limit keeps its first bytes and ends
// with a hash of the whole name.
func notifyChannel(schema string) string { return schemaChannel("errand_jobs_", schema) }

// cancelChannel is the channel of the schema's cancel requests: the payload
// is the id of a running job whose cancel an operator requested. JobCancel
// sends it inside its transaction, so it arrives when the request commits.
func cancelChannel(schema string) string { return schemaChannel("errand_cancel_", schema) }

// schemaChannel is a channel name of prefix and the schema's name, within
// PostgreSQL's identifier limit.
func schemaChannel(prefix, schema string) string {
	const maxLen = 63
	ch := prefix + schema
	if len(ch) <= maxLen {
		return ch
	}
	h := fnv.New64a()
	h.Write([]byte(schema))
	sum := fmt.Sprintf("_%016x", h.Sum64())
	keep := maxLen - len(prefix) - len(sum)
	for keep > 0 && !utf8.RuneStart(schema[keep]) {
		keep-- // never cut a character in two
	}
	return prefix + schema[:keep] + sum
}

// NotifyQueues implements [errandstore.Notifier]: it wakes the workers listening
// on this store's schema, in every process, for each of queues ("" wakes
// every queue). It sends them in one statement outside any transaction, each
// name once.
func (s *Store) NotifyQueues(ctx context.Context, queues []string) error {
	if len(queues) == 0 {
		return nil
	}
	queues = slices.Compact(slices.Sorted(slices.Values(storableOnly(queues)))) // no job is in another
	if len(queues) == 0 {
		return nil
	}
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, q) FROM unnest($2::text[]) AS q`,
		notifyChannel(s.name), queues); err != nil {
		return fmt.Errorf("notify queues: %w", err)
	}
	return nil
}

// ListenQueues implements [errandstore.Notifier]. It listens on the store's one
// listening connection, opened with the pool's settings but outside the pool
// so that it holds none of the pool's slots and shared with every other
// ListenQueues and ListenCancels of this Store, and returns once LISTEN is in
// place: a notification sent after it returns is delivered (or, when the
// connection is being re-established at that moment, the "" that follows the
// reconnect stands for it).
//
// The returned channel delivers each queue name notified, names that arrive
// while the reader is busy gathered and delivered once each, so that a slow
// reader never holds up the connection or the other subscriptions. When the
// connection drops, the listener reconnects with backoff (100ms doubling to
// 5s, jittered) and then delivers "", asking the reader to look at every
// queue, since notifications sent while it was away are lost. It closes the
// channel when ctx ends; ctx, not [Store.Close], ends it. The connection is
// closed when the last subscription ends, before that subscription's channel.
func (s *Store) ListenQueues(ctx context.Context) (<-chan string, error) {
	out, err := s.listen(ctx, notifyChannel(s.name))
	if err != nil {
		return nil, fmt.Errorf("listen for queues: %w", err)
	}
	return out, nil
}

var _ errandstore.CancelListener = (*Store)(nil)

// ListenCancels implements [errandstore.CancelListener]: it listens, as
// ListenQueues does and on the same connection, on the schema's cancel
// channel, and delivers the ids that JobCancel notifies, "" after a
// reconnect.
func (s *Store) ListenCancels(ctx context.Context) (<-chan string, error) {
	out, err := s.listen(ctx, cancelChannel(s.name))
	if err != nil {
		return nil, fmt.Errorf("listen for cancels: %w", err)
	}
	return out, nil
}

// listenHub is a Store's listening connection: one connection, LISTENing on
// both of the schema's channels, for every subscription of the Store, so
// that a worker, which listens for wake-ups and for cancels, holds one
// connection on the server rather than two. It is opened by the first
// subscription and closed when the last one ends.
type listenHub struct {
	mu   sync.Mutex
	subs map[*listener]struct{} // the subscriptions; nil while no connection is open
	stop context.CancelFunc     // ends the connection's reader
	done chan struct{}          // closed once the reader has closed the connection
}

// listen delivers the payloads of channel's notifications as ListenQueues
// describes.
func (s *Store) listen(ctx context.Context, channel string) (<-chan string, error) {
	l := &listener{
		channel: channel,
		ready:   make(chan struct{}, 1),
		names:   map[string]struct{}{},
	}
	h := &s.hub
	h.mu.Lock()
	if h.subs == nil {
		// Connecting under the lock makes a second subscriber wait for
		// this connection rather than open its own.
		conn, err := s.listenConn(ctx)
		if err != nil {
			h.mu.Unlock()
			return nil, err
		}
		readCtx, stop := context.WithCancel(context.Background())
		h.subs, h.stop, h.done = map[*listener]struct{}{}, stop, make(chan struct{})
		go func(done chan struct{}) {
			defer close(done)
			s.readListen(readCtx, conn)
		}(h.done)
	}
	h.subs[l] = struct{}{}
	h.mu.Unlock()
	out := make(chan string)
	go func() {
		defer close(out)
		l.forward(ctx, out)
		if done := s.unlisten(l); done != nil {
			<-done // close the channel only once the connection is closed
		}
	}()
	return out, nil
}

// unlisten ends l's subscription. When it was the last, it stops the
// connection's reader and returns the channel closed once the connection
// is; otherwise nil.
func (s *Store) unlisten(l *listener) <-chan struct{} {
	h := &s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, l)
	if len(h.subs) > 0 {
		return nil
	}
	done := h.done
	h.stop()
	h.subs, h.stop, h.done = nil, nil, nil
	return done
}

// deliver passes a payload of channel to the subscriptions on channel, every
// subscription when channel is "" (the payload is then "": after a
// reconnect, look at everything).
func (s *Store) deliver(channel, payload string) {
	h := &s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	for l := range h.subs {
		if channel == "" || l.channel == channel {
			l.add(payload)
		}
	}
}

// listenConn opens a connection that listens on the schema's channels, and
// checks that notifications sent through the pool reach it (see probeListen).
func (s *Store) listenConn(ctx context.Context) (*pgx.Conn, error) {
	cfg := s.listenConfig()
	if app := cfg.RuntimeParams["application_name"]; app != "" {
		cfg.RuntimeParams["application_name"] = app + "/listener"
	} else {
		cfg.RuntimeParams["application_name"] = listenerAppName
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	probe := fmt.Sprintf("errand_probe_%016x", rand.Uint64())
	if _, err := conn.Exec(ctx, s.listenSQL()+`; LISTEN `+probe); err != nil {
		closeConn(conn)
		return nil, err
	}
	if err := s.probeListen(ctx, conn, probe); err != nil {
		closeConn(conn)
		return nil, err
	}
	return conn, nil
}

// errListenThroughPooler is probeListen's finding.
var errListenThroughPooler = errors.New("a notification sent through the pool did not reach the listening connection: " +
	"a pooler in transaction mode is in between (LISTEN holds to one server connection, which such a pooler hands to others); " +
	"set ListenURL (ERRAND_LISTEN_DB for the CLI) to a direct connection to the server, or run workers poll-only")

// probeListen sends a notification on channel probe through the pool and
// waits for it on conn, so that a listener behind a pooler in transaction
// mode, which would never hear anything, fails at once with what to change
// rather than leave every wake-up to the poll. It costs one round trip and
// the delivery, once per connection.
func (s *Store) probeListen(ctx context.Context, conn *pgx.Conn, probe string) error {
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, '')`, probe); err != nil {
		return err
	}
	waitCtx, cancel := context.WithTimeout(ctx, listenProbeTimeout)
	defer cancel()
	for {
		n, err := conn.WaitForNotification(waitCtx)
		switch {
		case err == nil && n.Channel == probe:
			return nil
		case err == nil:
			// A wake-up before the probe: no one subscribes yet on a first
			// connection, and a reconnect is followed by "" for every queue.
		case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
			return errListenThroughPooler
		default:
			return err
		}
	}
}

// listenSQL is the statement that listens on the schema's channels: one
// round trip (the simple protocol, as Exec without arguments uses, sends
// both statements at once).
func (s *Store) listenSQL() string {
	return `LISTEN ` + pgx.Identifier{notifyChannel(s.name)}.Sanitize() +
		`; LISTEN ` + pgx.Identifier{cancelChannel(s.name)}.Sanitize()
}

// closeConn closes conn, waiting at most a second for the server to hear it.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// listener is one ListenQueues or ListenCancels subscription: the hub's
// reader adds notifications of its channel into a set of pending names,
// forward hands them to the reader.
type listener struct {
	channel string
	ready   chan struct{} // holds a token while names are pending

	mu    sync.Mutex
	names map[string]struct{} // pending queue names
	all   bool                // "" is pending: it stands for every name
}

// add records a name for the reader; it never blocks.
func (l *listener) add(name string) {
	l.mu.Lock()
	switch {
	case l.all:
	case name == "" || len(l.names) >= listenMaxPending:
		l.all = true
		clear(l.names)
	default:
		l.names[name] = struct{}{}
	}
	l.mu.Unlock()
	select {
	case l.ready <- struct{}{}:
	default:
	}
}

// take removes and returns the pending names.
func (l *listener) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.all {
		l.all = false
		return []string{""}
	}
	names := make([]string, 0, len(l.names))
	for n := range l.names {
		names = append(names, n)
	}
	clear(l.names)
	return names
}

// forward delivers pending names on out until ctx ends.
func (l *listener) forward(ctx context.Context, out chan<- string) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.ready:
		}
		for _, name := range l.take() {
			select {
			case out <- name:
			case <-ctx.Done():
				return
			}
		}
	}
}

// readListen waits for notifications on conn, replacing it when it drops,
// until ctx ends; then it closes the connection.
func (s *Store) readListen(ctx context.Context, conn *pgx.Conn) {
	defer func() {
		if conn != nil {
			closeConn(conn)
		}
	}()
	for {
		s.receive(ctx, conn)
		if ctx.Err() != nil {
			return
		}
		// The connection failed; polling finds jobs meanwhile, and lease
		// renewals deliver cancels.
		s.logger.Warn("listener lost its connection; reconnecting", "schema", s.name)
		closeConn(conn)
		conn = s.reconnectListen(ctx)
		if conn == nil {
			return // ctx ended
		}
		s.logger.Info("listener reconnected", "schema", s.name)
		s.deliver("", "") // whatever was notified meanwhile is lost: look everywhere
	}
}

// receive passes conn's notifications to the subscriptions until conn fails
// or ctx ends. After listenIdlePing of silence it checks the connection by
// listening again: a no-op round trip that leaves pg_stat_activity showing
// the LISTEN.
func (s *Store) receive(ctx context.Context, conn *pgx.Conn) {
	for {
		waitCtx, cancel := context.WithTimeout(ctx, listenIdlePing)
		n, err := conn.WaitForNotification(waitCtx)
		cancel()
		switch {
		case err == nil:
			s.deliver(n.Channel, n.Payload)
			continue
		case ctx.Err() != nil, !errors.Is(err, context.DeadlineExceeded), conn.IsClosed():
			return
		}
		pingCtx, cancel := context.WithTimeout(ctx, listenPingTimeout)
		_, err = conn.Exec(pingCtx, s.listenSQL())
		cancel()
		if err != nil {
			return
		}
	}
}

// listenConfig is the listening connection's configuration: ListenURL's,
// or the pool's, each server bounded by listenConnectTimeout when it sets
// no connect timeout of its own.
func (s *Store) listenConfig() *pgx.ConnConfig {
	cfg := s.listenTo
	if cfg == nil {
		cfg = s.pool.Config().ConnConfig
	}
	cfg = cfg.Copy()
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = listenConnectTimeout
	}
	return cfg
}

// listenAttemptTimeout bounds one attempt to reconnect the listener: the
// connect timeout once for each server of the listener's URL, as much for
// the pool's (the probe's notification goes through the pool, perhaps on a
// new connection), and the probe's wait. After a failover the first server
// may be a dead primary that never answers; a bound of one timeout would
// run out on it every time and never reach the promoted standby.
func (s *Store) listenAttemptTimeout() time.Duration {
	return connectBound(&s.listenConfig().Config) + connectBound(&s.pool.Config().ConnConfig.Config) + listenProbeTimeout
}

// connectBound is the longest a connection of cfg may take to find a
// server: its connect timeout (listenConnectTimeout when it sets none) for
// each server it names.
func connectBound(cfg *pgconn.Config) time.Duration {
	per := cfg.ConnectTimeout
	if per <= 0 {
		per = listenConnectTimeout
	}
	return per * time.Duration(len(hostList(cfg)))
}

// reconnect opens a new listening connection, waiting with backoff between
// attempts. It returns nil when ctx ends first.
func (s *Store) reconnectListen(ctx context.Context) *pgx.Conn {
	backoff := listenBackoffMin
	for {
		// Equal jitter: half the backoff, plus up to as much again at random,
		// so that workers dropped together do not reconnect together.
		wait := backoff/2 + rand.N(backoff/2+1)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		attemptCtx, cancel := context.WithTimeout(ctx, s.listenAttemptTimeout())
		conn, err := s.listenConn(attemptCtx)
		cancel()
		if err == nil {
			return conn
		}
		backoff = min(2*backoff, listenBackoffMax)
	}
}
