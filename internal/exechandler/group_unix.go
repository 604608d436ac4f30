//go:build unix

package exechandler

import (
	"errors"
	"os"
	"syscall"
)

// newProcessGroup puts the command in a process group of its own, whose id
// is the command's pid, so that the group can be killed as one.
func newProcessGroup() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

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
