package main

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestProcsDieWithTheSoak: a process the soak started does not outlive the
// soak. The test runs itself as a soak that starts a long sleep, prints
// its pid and exits at once, without stopping it.
func TestProcsDieWithTheSoak(t *testing.T) {
	if dir := os.Getenv("ERRAND_SOAK_PROC_PARENT"); dir != "" {
		p, err := startProc("sleep", dir, "sleeper", []string{"300"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("child " + strconv.Itoa(p.pid()) + "\n")
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestProcsDieWithTheSoak$")
	cmd.Env = append(os.Environ(), "ERRAND_SOAK_PROC_PARENT="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the soak: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(childLine(string(out))), "child "))
	if err != nil {
		t.Fatalf("the soak printed no child pid: %q", out)
	}
	for deadline := time.Now().Add(10 * time.Second); running(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			exec.Command("kill", "-9", strconv.Itoa(pid)).Run()
			t.Fatalf("child %d still runs 10s after the soak exited", pid)
		}
	}
}

// childLine is the last line of s that names the child.
func childLine(s string) string {
	var last string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "child ") {
			last = sc.Text()
		}
	}
	return last
}

// running reports whether pid runs: it exists and is not a zombie.
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}
