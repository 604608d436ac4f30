// Package growstack grows the calling goroutine's stack ahead of need.
//
// A goroutine starts with a 2 KiB stack, which the runtime doubles, by
// copying it and adjusting every frame on it, each time a call would
// overflow it. A goroutine that is short-lived and deep, like the one that
// runs one job's handler and decodes its JSON args, pays for that growth
// on every run, with its deepest frames on the stack. Growing it once at
// the goroutine's start, where the stack holds only a frame or two, costs
// far less.
package growstack

// Grow makes the calling goroutine's stack 8 KiB, if it is smaller: enough
// for a handler to decode its args with encoding/json and have its outcome
// recorded without another growth. 8 KiB and not more: the garbage
// collector halves the stack of a goroutine that waits using less than a
// quarter of it, and a profile of a busy worker showed its jobs'
// goroutines, grown to 16 KiB, halved as they waited for their outcomes
// to be written, and at 8 KiB neither grown again nor halved.
//
//go:noinline
func Grow() {
	var frame [5 << 10]byte // with the goroutine's few frames, past 4 KiB
	use(frame[:])
}

// use keeps frame on the stack: the compiler may not drop an array that is
// passed to a function it does not inline.
//
//go:noinline
func use([]byte) {}
