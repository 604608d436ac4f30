package main

import (
	"bufio"
	"context"

	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// buildErrand builds ./cmd/errand once into dir.
func buildErrand(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "errand")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/errandhq/errand/cmd/errand").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/errand: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return bin, nil
}

// proc is one errand process under soak.
type proc struct {
	name    string
	cmd     *exec.Cmd
	log     string // its stderr and stdout
	metrics string // URL of its /metrics
	healthz string
	token   string // bearer token for /metrics, if any
	done    chan struct{}
	err     error // its exit, once done is closed
}

// freeAddr returns a loopback address with a port free now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startProc starts bin with args and env in addition to this process's
// environment, its output to dir/name.log.
func startProc(bin, dir, name string, args, env []string) (*proc, error) {
	p := &proc{name: name, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	f, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	// A soak killed outright takes its workers and server with it, rather
	// than leaving them holding leases and load on the database.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited reports how the process ended, with the end of its log.
func (p *proc) exited() error {
	return fmt.Errorf("%s exited during the run (%v); its log %s ends: %s", p.name, p.err, p.log, tail(p.log, 5))
}

// tail returns the last n lines of a file, on one line.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, " | ")
}

// waitHealthy polls the process's /healthz until it answers 200.
func (p *proc) waitHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if resp, err := http.Get(p.healthz); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return p.exited()
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer %s within a minute; see %s", p.name, p.healthz, p.log)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop drains the process with SIGTERM and kills it if it has not exited
// within a minute.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// startFleet starts the workers and the API server, and waits until each
// answers.
func startFleet(ctx context.Context, cfg *config, bin, dir, sinkURL string, env []string) ([]*proc, *proc, error) {
	var all []*proc
	fail := func(err error) ([]*proc, *proc, error) {
		for _, p := range all {
			p.stop()
		}
		return nil, nil, err
	}
	var workers []*proc
	for i := range cfg.workers {
		addr, err := freeAddr()
		if err != nil {
			return fail(err)
		}
		p, err := startProc(bin, dir, "worker"+strconv.Itoa(i), []string{"work",
			"--queue", "default=50", "--http", "soak=" + sinkURL,
			"--retain-succeeded", "2m", "--retain-dead", "2m", "--retain-every", "30s",
			"--metrics-addr", addr, "--lease", "10s", "--grace", "5s"}, env)
		if err != nil {
			return fail(err)
		}
		p.metrics, p.healthz = "http://"+addr+"/metrics", "http://"+addr+"/healthz"
		all, workers = append(all, p), append(workers, p)
	}
	addr, err := freeAddr()
	if err != nil {
		return fail(err)
	}
	token := randomHex(32)
	serve, err := startProc(bin, dir, "serve", []string{"serve", "--addr", addr}, append(env, "ERRAND_TOKEN="+token))
	if err != nil {
		return fail(err)
	}
	serve.metrics, serve.healthz, serve.token = "http://"+addr+"/metrics", "http://"+addr+"/healthz", token
	all = append(all, serve)
	for _, p := range all {
		if err := p.waitHealthy(ctx); err != nil {
			return fail(err)
		}
	}
	return workers, serve, nil
}
