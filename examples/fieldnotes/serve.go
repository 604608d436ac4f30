package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// defaultAddr is loopback: the API has no authentication.
const defaultAddr = "127.0.0.1:4318"

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", "serve DB [--addr 127.0.0.1:4318]", stdout)
	addr := fs.String("addr", defaultAddr, "listen address: 127.0.0.1:PORT, [::1]:PORT or localhost:PORT (loopback only; the API has no authentication)")
	pos, err := fs.parse(args, "DB")
	if err != nil {
		return err
	}
	if err := checkListenAddr(*addr); err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	a, err := openApp(ctx, pos[0], nil, true)
	if err != nil {
		return err
	}
	defer a.close()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("serve: %w; pick another --addr", err)
	}
	// localhost is resolved by the system; a hosts file could point it
	// elsewhere.
	if ap, ok := ln.Addr().(*net.TCPAddr); !ok || !ap.IP.IsLoopback() {
		ln.Close()
		return fmt.Errorf("serve: --addr %s resolved to %s, which is not loopback; use 127.0.0.1:PORT", *addr, ln.Addr())
	}
	srv := newServer(newHandler(a, logger), logger)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	logger.Info("serving", "addr", "http://"+ln.Addr().String(), "db", pos[0])

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("shut down: %w", err)
	}
	logger.Info("stopped")
	return nil
}

// checkListenAddr refuses, before anything listens, an address that is not
// on loopback: the API has no authentication, so any host that can reach it
// can spend the wallet. Hostnames other than localhost are refused rather
// than resolved, and an empty host means every interface.
func checkListenAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("serve: --addr %q: %v; use 127.0.0.1:PORT", addr, err)
	}
	if !isLoopbackHost(host) {
		return usagef("serve: --addr %q is not loopback and the API has no authentication; use 127.0.0.1:PORT, [::1]:PORT or localhost:PORT", addr)
	}
	return nil
}

// isLoopbackHost reports whether host is localhost or a loopback IP literal
// (127.0.0.0/8, ::1). It never resolves a name.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// newServer returns the http.Server for h, with limits that keep one slow or
// idle client from holding a connection open for ever. No request has a
// body; the slowest handler is a purchase, which may wait for the store's
// busy timeout (ten seconds by default) while another process writes, so
// WriteTimeout leaves room for that.
func newServer(h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// server is the HTTP API over one Field Notes database. There is one fixed
// demo author and no authentication.
type server struct {
	app    *app
	logger *slog.Logger
}

// newHandler returns the API. No administrative endpoint exists: jobs are
// inspected with the jobs command.
func newHandler(a *app, logger *slog.Logger) http.Handler {
	s := &server{app: a, logger: logger}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /documents", s.documents)
	mux.HandleFunc("GET /wallet", s.wallet)
	mux.HandleFunc("POST /documents/{id}/purchase", s.purchase)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no route %s %s; the API has GET /documents, GET /wallet and POST /documents/{id}/purchase", r.Method, r.URL.Path))
	})
	return apiHeaders(checkHost(refuseOrigin(refuseBody(mux))))
}

// apiHeaders sets the headers every answer carries, refusals included.
// Bodies are JSON, and a browser must not guess otherwise (nosniff); a
// default Content-Type also keeps the mux's path-cleaning redirects from
// writing HTML. Nothing may cache a wallet or a purchase, and no page may
// frame or load what the API returns.
func apiHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
		next.ServeHTTP(w, r)
	})
}

// checkHost answers 421 to a request whose Host is not localhost or a
// loopback literal with the port this connection arrived on. A web page can
// point a name it controls at 127.0.0.1 (DNS rebinding) and read the answers
// as its own, same-origin, without any Origin header; its requests still
// carry that name as Host.
func checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !localHost(r) {
			writeError(w, http.StatusMisdirectedRequest, fmt.Sprintf("Host %q is refused: this API answers only to localhost, 127.0.0.1 or [::1] with the port it listens on", r.Host))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// localHost reports whether r's Host names loopback and the local port of
// r's connection. A Host without a port means port 80. A request that
// arrived on no known port is refused.
func localHost(r *http.Request) bool {
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil {
		host, port = strings.TrimSuffix(strings.TrimPrefix(r.Host, "["), "]"), ""
	}
	if port == "" {
		port = "80"
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
	return ok && isLoopbackHost(host) && port == strconv.Itoa(local.Port)
}

// refuseOrigin refuses every request that carries an Origin header. Browsers
// send one on cross-site requests (and on same-origin POSTs), so no web page
// can drive this unauthenticated API, whatever it is.
func refuseOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.Header.Values("Origin")) > 0 {
			writeError(w, http.StatusForbidden, "requests with an Origin header are refused: this API has no authentication and no browser may drive it")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refuseBody answers 413 to a request with a body: no endpoint reads one,
// so none is accepted, whatever its size.
func refuseBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 {
			writeError(w, http.StatusRequestEntityTooLarge, "this API takes no request body; send the request without one")
			return
		}
		next.ServeHTTP(w, r)
	})
}

type documentView struct {
	ID         string  `json:"id"`
	Title      string  `json:"title"`
	PriceCents int64   `json:"price_cents"`
	Purchased  bool    `json:"purchased"`
	PaymentID  *string `json:"payment_id"`
}

func (s *server) documents(w http.ResponseWriter, r *http.Request) {
	rows, err := s.app.db.QueryContext(r.Context(), `SELECT d.id, d.title, d.price_cents, p.id
		FROM documents d LEFT JOIN payments p ON p.document_id = d.id ORDER BY d.id`)
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	defer rows.Close()
	docs := []documentView{}
	for rows.Next() {
		var d documentView
		if err := rows.Scan(&d.ID, &d.Title, &d.PriceCents, &d.PaymentID); err != nil {
			s.internalError(w, r, err)
			return
		}
		d.Purchased = d.PaymentID != nil
		docs = append(docs, d)
	}
	if err := rows.Err(); err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, docs)
}

func (s *server) wallet(w http.ResponseWriter, r *http.Request) {
	b, err := s.app.balance(r.Context())
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"balance_cents": b})
}

func (s *server) purchase(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	if msg := checkIdempotencyKey(key); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	p, err := s.app.purchase(r.Context(), r.PathValue("id"), key)
	var ref *refusal
	switch {
	case errors.As(err, &ref):
		writeError(w, ref.Status, ref.Message)
		return
	case err != nil:
		s.internalError(w, r, err)
		return
	}
	if p.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(p.Status)
	w.Write(append(p.Body, '\n'))
}

// checkIdempotencyKey returns what is wrong with key, or "".
func checkIdempotencyKey(key string) string {
	if len(key) > 255 {
		return "Idempotency-Key must be at most 255 bytes; a UUID is a good key"
	}
	for _, r := range key {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return "Idempotency-Key must be printable and without spaces; a UUID is a good key"
		}
	}
	return ""
}

func (s *server) internalError(w http.ResponseWriter, r *http.Request, err error) {
	s.logger.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	writeError(w, http.StatusInternalServerError, "internal error; the server log has the cause")
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
