//go:build linux

package sqlite

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"
)

// watchWAL signals on ch, without blocking, whenever a process writes the
// WAL file of the database at path, as inotify reports it. It watches the
// directory, since SQLite deletes and recreates the WAL file. stop ends
// the watch and waits for it.
func watchWAL(path string, ch chan<- struct{}) (stop func(), err error) {
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	if _, err := syscall.InotifyAddWatch(fd, filepath.Dir(path), syscall.IN_MODIFY|syscall.IN_CREATE); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	// A non-blocking descriptor joins the runtime's poller, so Close
	// interrupts a Read that waits.
	f := os.NewFile(uintptr(fd), "inotify")
	wal := []byte(filepath.Base(path) + "-wal")
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			n, err := f.Read(buf)
			if err != nil {
				return
			}
			if namesWAL(buf[:n], wal) {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}
	}()
	return func() { f.Close(); <-done }, nil
}

// namesWAL reports whether the inotify events in buf include one about the
// file named wal, or an overflow that may have hidden one.
func namesWAL(buf, wal []byte) bool {
	for len(buf) >= syscall.SizeofInotifyEvent {
		ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[0]))
		end := syscall.SizeofInotifyEvent + int(ev.Len)
		if end > len(buf) {
			return true // cannot happen; err on the side of a check
		}
		if ev.Mask&syscall.IN_Q_OVERFLOW != 0 {
			return true
		}
		name := bytes.TrimRight(buf[syscall.SizeofInotifyEvent:end], "\x00")
		if bytes.Equal(name, wal) {
			return true
		}
		buf = buf[end:]
	}
	return false
}
