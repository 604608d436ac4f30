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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(report(err, os.Stderr))
}
