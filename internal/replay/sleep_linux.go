package replay

import (
	"syscall"
	"time"
)

// sleepUntil blocks the calling thread in the kernel until deadline. Go's
// timers wake up to a millisecond late on Linux, as much as a whole step of
// the devices profiled; nanosleep is accurate to tens of microseconds and,
// like a cgo call that waits for a GPU, parks the thread without spinning.
func sleepUntil(deadline time.Time) {
	for {
		d := time.Until(deadline)
		if d <= 0 {
			return
		}
		ts := syscall.NsecToTimespec(int64(d))
		if err := syscall.Nanosleep(&ts, nil); err != nil && err != syscall.EINTR {
			time.Sleep(time.Until(deadline))
			return
		}
	}
}
