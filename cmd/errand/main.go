// Command errand is the operator's tool for errand: enqueue, work, list,
// inspect, replay and cancel jobs, and summarise queues. Run `errand help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := interrupts(context.Background())
	err := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(report(err, os.Stderr))
}

// interrupts returns a context that the first SIGINT or SIGTERM cancels (a
// graceful stop: errand work drains) and that carries a channel a second
// one closes (stop at once: see withForceStop).
func interrupts(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	forced := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-done:
			return
		}
		select {
		case <-sigs:
			close(forced)
		case <-done:
		}
	}()
	return withForceStop(ctx, forced), func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}

type forceStopKey struct{}

// withForceStop attaches to ctx a channel whose closing asks a command that
// is stopping gracefully to stop at once instead.
func withForceStop(ctx context.Context, forced <-chan struct{}) context.Context {
	return context.WithValue(ctx, forceStopKey{}, forced)
}

// forceStop returns the channel withForceStop attached, or nil (never
// closed) when there is none.
func forceStop(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(forceStopKey{}).(<-chan struct{})
	return ch
}
