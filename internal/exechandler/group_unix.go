//go:build unix

package exechandler

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// killGroup kills every process in the command's group. A group that is
// already gone is not an error.
func killGroup(p *os.Process) error {
	if p == nil {
		return nil
	}
	err := syscall.Kill(-p.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// guardShell runs the guard. Every Unix system has it; tests take it away.
var guardShell = "/bin/sh"

// guardScript ignores the signals a command may send its own group, waits
// for the end of its stdin, then kills its group, itself included.
const guardScript = `trap '' HUP INT QUIT TERM; read x; kill -9 0`

// A guard kills a command's process group when the worker dies. It is a
// shell in the group, a sibling of the command rather than its parent (the
// command stays a direct child of the worker), reading a pipe whose write
// end only the worker holds. However the worker ends, SIGKILL included,
// the kernel closes that end, the guard reads the end of the pipe and
// kills the group: the command's children too, which no parent-death
// signal reaches.
//
// As a member of the group the guard also keeps the group's id from being
// reused while the worker may still kill it by that id.
type guard struct {
	cmd *exec.Cmd
	w   *os.File // never written; closed by the kernel if the worker dies
}

// startGuard starts a guard in process group pgid, which must exist: start
// it before waiting for the command, whose unreaped process keeps the group.
func startGuard(pgid int) (*guard, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(guardShell, "-c", guardScript)
	cmd.Stdin = r
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, err
	}
	return &guard{cmd: cmd, w: w}, nil
}

// stop ends the guard, once the worker has killed the group itself. A nil
// guard (one that could not start) does nothing.
func (g *guard) stop() {
	if g == nil {
		return
	}
	_ = g.cmd.Process.Kill()
	g.w.Close()
	_ = g.cmd.Wait()
}
