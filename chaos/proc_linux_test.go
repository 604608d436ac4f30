package chaos

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProcDiesWithHarness: a child the harness started does not outlive the
// harness's process, though it runs in a process group of its own. The
// test runs itself as a harness that starts a long sleep, prints its pid
// and exits.
func TestProcDiesWithHarness(t *testing.T) {
	if os.Getenv("ERRAND_CHAOS_PROC_PARENT") != "" {
		p := &proc{name: "sleeper", argv: []string{"sleep", "300"}, log: filepath.Join(os.Getenv("ERRAND_CHAOS_PROC_PARENT"), "sleeper.log")}
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("child " + strconv.Itoa(p.cmd.Process.Pid) + "\n")
		os.Exit(0) // no cleanup: the harness dies
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestProcDiesWithHarness$")
	cmd.Env = append(os.Environ(), "ERRAND_CHAOS_PROC_PARENT="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if s, ok := strings.CutPrefix(sc.Text(), "child "); ok {
			pid, _ = strconv.Atoi(s)
		}
	}
	cmd.Wait()
	if pid == 0 {
		t.Fatal("the harness printed no child pid")
	}
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil && !zombie(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("child %d still runs 10s after its harness exited", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// zombie reports whether pid has exited and awaits a reaper.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}
