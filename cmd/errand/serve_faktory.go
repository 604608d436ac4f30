package main

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/faktory"
)

// defaultFaktoryAddr is Faktory's own port, on the loopback interface.
const defaultFaktoryAddr = "127.0.0.1:7419"

// faktoryOptions checks errand serve's --faktory and --faktory-password
// (or ERRAND_FAKTORY_PASSWORD) and returns the Faktory server's options,
// or nil without --faktory. A non-loopback address needs a password, as
// --addr needs a token.
func faktoryOptions(addr, password string, e *env) (*faktory.Options, error) {
	if password == "" {
		password = os.Getenv("ERRAND_FAKTORY_PASSWORD")
	}
	if addr == "" {
		if password != "" {
			return nil, usagef("--faktory-password (or ERRAND_FAKTORY_PASSWORD) needs --faktory HOST:PORT, e.g. --faktory %s", defaultFaktoryAddr)
		}
		return nil, nil
	}
	loopback, err := isLoopbackFlag("--faktory", addr, defaultFaktoryAddr)
	if err != nil {
		return nil, err
	}
	if !loopback && password == "" {
		return nil, usagef("--faktory %s is not a loopback address: give --faktory-password (or ERRAND_FAKTORY_PASSWORD) so that every Faktory client proves it, or listen on 127.0.0.1", addr)
	}
	if password != "" {
		if err := errandhttp.CheckSecret(password); err != nil {
			return nil, usagef("--faktory-password: %v", err)
		}
	}
	return &faktory.Options{Password: password, Logger: e.logger}, nil
}

// startFaktory serves Faktory's protocol for c on addr in the background.
func startFaktory[TTx any](c *errand.Client[TTx], addr string, opts *faktory.Options, e *env) (*faktory.Server, error) {
	srv, err := faktory.NewServer(c, opts)
	if err != nil {
		return nil, err
	}
	ln, err := listen(addr, "--faktory")
	if err != nil {
		return nil, err
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, faktory.ErrServerClosed) {
			e.logger.Error("faktory server failed", "err", err)
		}
	}()
	e.logger.Info("serving faktory", "addr", ln.Addr().String(), "password", opts.Password != "")
	return srv, nil
}

// stopFaktory tells Faktory workers to terminate and waits up to grace for
// them to acknowledge or fail the jobs they hold, then closes their
// connections. A job still held is not lost: it runs again once its lease
// (reserve_for) ends.
func stopFaktory(srv *faktory.Server, grace time.Duration, e *env) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		e.logger.Warn("faktory workers still held jobs after --grace; they run again when their reservations end", "grace", grace)
	}
}
