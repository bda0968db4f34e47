//go:build !linux

package replay

import "time"

// sleepUntil waits until deadline on Go's timers, which are as accurate as
// the platform's.
func sleepUntil(deadline time.Time) { time.Sleep(time.Until(deadline)) }
