//go:build unix

package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var servingFaktory = regexp.MustCompile(`msg="serving faktory" addr=(\S+)`)

// faktoryConn is a raw Faktory protocol connection to errand serve.
type faktoryConn struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

// dialFaktory connects to the --faktory address s logged and says HELLO
// as worker wid, proving password when there is one.
func dialFaktory(t *testing.T, s *served, wid, password string) *faktoryConn {
	t.Helper()
	m := servingFaktory.FindStringSubmatch(s.log())
	if m == nil {
		t.Fatalf("errand serve did not log its Faktory address:\n%s", s.log())
	}
	nc, err := net.Dial("tcp", m[1])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &faktoryConn{t: t, nc: nc, r: bufio.NewReader(nc)}
	var hi struct {
		V    int    `json:"v"`
		Salt string `json:"s"`
		Iter int    `json:"i"`
	}
	greeting := c.reply()
	if err := json.Unmarshal([]byte(strings.TrimPrefix(greeting, "+HI ")), &hi); err != nil || hi.V != 2 {
		t.Fatalf("greeting %q", greeting)
	}
	hello := map[string]any{"v": 2, "wid": wid, "hostname": "test"}
	if password != "" {
		sum := sha256.Sum256([]byte(password + hi.Salt))
		for i := 1; i < hi.Iter; i++ {
			sum = sha256.Sum256(sum[:])
		}
		hello["pwdhash"] = hex.EncodeToString(sum[:])
	}
	b, _ := json.Marshal(hello)
	if got := c.send("HELLO " + string(b)); got != "+OK" {
		t.Fatalf("HELLO: %q", got)
	}
	return c
}

func (c *faktoryConn) send(line string) string {
	c.t.Helper()
	if _, err := io.WriteString(c.nc, line+"\r\n"); err != nil {
		c.t.Fatal(err)
	}
	return c.reply()
}

// reply reads a reply: a simple one as sent, a bulk string's payload
// after "$", null as "$nil".
func (c *faktoryConn) reply() string {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	line = strings.TrimSuffix(line, "\r\n")
	if !strings.HasPrefix(line, "$") {
		return line
	}
	n, _ := strconv.Atoi(line[1:])
	if n < 0 {
		return "$nil"
	}
	b := make([]byte, n+2)
	if _, err := io.ReadFull(c.r, b); err != nil {
		c.t.Fatal(err)
	}
	return "$" + string(b[:n])
}

// TestServeFaktory pushes and fetches a job over errand serve's --faktory
// port, reads it through the JSON API, and stops the server while the
// worker holds it: the worker is told to terminate, its ACK is still
// recorded, and the server exits cleanly.
func TestServeFaktory(t *testing.T) {
	db := tempDB(t)
	s := startServe(t, "--db", db, "--token", serveToken, "--faktory", "127.0.0.1:0", "--grace", "20s")
	w := dialFaktory(t, s, "w1", "")
	if got := w.send(`PUSH {"jid":"fk-000001","jobtype":"resize","args":[7],"priority":9}`); got != "+OK" {
		t.Fatalf("PUSH: %q", got)
	}
	var job struct {
		Kind     string `json:"kind"`
		State    string `json:"state"`
		Priority int    `json:"priority"`
	}
	if code := s.call(t, "GET", "/api/v1/jobs/fk-000001", nil, &job); code != http.StatusOK || job.Kind != "resize" || job.State != "queued" || job.Priority != -4 {
		t.Fatalf("GET the pushed job: %d %+v", code, job)
	}
	if got := w.send("FETCH default"); !strings.Contains(got, `"jid":"fk-000001"`) {
		t.Fatalf("FETCH: %q", got)
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := w.send(`BEAT {"wid":"w1"}`)
		if got == `${"state":"terminate"}` {
			break
		}
		if got != "+OK" || time.Now().After(deadline) {
			t.Fatalf("BEAT after SIGTERM: %q, want terminate", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := w.send(`ACK {"jid":"fk-000001"}`); got != "+OK" {
		t.Fatalf("ACK during shutdown: %q", got)
	}
	select {
	case err := <-s.done:
		s.done <- err
		if err != nil {
			t.Fatalf("errand serve exited with %v:\n%s", err, s.log())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("errand serve did not stop once the held job was acknowledged:\n%s", s.log())
	}
	r := cli(t, "inspect", "fk-000001", "--db", db, "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"succeeded"`) {
		t.Fatalf("errand inspect after the ACK: %s", r)
	}
}

// TestServeFaktoryPassword: the password from ERRAND_FAKTORY_PASSWORD is
// required of every Faktory client.
func TestServeFaktoryPassword(t *testing.T) {
	const password = "fk-pass-7c1e4b9a2d"
	t.Setenv("ERRAND_FAKTORY_PASSWORD", password)
	s := startServe(t, "--db", tempDB(t), "--token", serveToken, "--faktory", "127.0.0.1:0")
	w := dialFaktory(t, s, "w1", password)
	if got := w.send(`BEAT {"wid":"w1"}`); got != "+OK" {
		t.Fatalf("BEAT: %q", got)
	}
	m := servingFaktory.FindStringSubmatch(s.log())
	nc, err := net.Dial("tcp", m[1])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	bad := &faktoryConn{t: t, nc: nc, r: bufio.NewReader(nc)}
	bad.reply()
	if got := bad.send(`HELLO {"v":2,"pwdhash":"00"}`); got != "-ERR invalid password" {
		t.Fatalf("HELLO with a wrong password: %q", got)
	}
	s.stop(t)
}

func TestServeFaktoryRefusesBadFlags(t *testing.T) {
	db := tempDB(t)
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--faktory", "0.0.0.0:7419"}, "--faktory 0.0.0.0:7419 is not a loopback address: give --faktory-password"},
		{[]string{"--faktory", ":7419"}, "is not a loopback address"},
		{[]string{"--faktory", "nonsense"}, `--faktory "nonsense": write HOST:PORT, e.g. 127.0.0.1:7419`},
		{[]string{"--faktory", "127.0.0.1:99999"}, "give a port from 0 to 65535"},
		{[]string{"--faktory", "0.0.0.0:7419", "--faktory-password", "short"}, "--faktory-password: secret is 5 bytes"},
		{[]string{"--faktory-password", "fk-pass-7c1e4b9a2d"}, "--faktory-password (or ERRAND_FAKTORY_PASSWORD) needs --faktory HOST:PORT"},
	} {
		r := cli(t, append([]string{"serve", "--db", db, "--token", serveToken}, tc.args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.says) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("serve %v: %s; want a one-line usage error saying %q", tc.args, r, tc.says)
		}
	}
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused serve created the database: %v", err)
	}
}
