//go:build !linux

package replay

import "time"

// cpuTime is unknown here.
func cpuTime() time.Duration { return -1 }
