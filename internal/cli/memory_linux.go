package cli

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// MemoryLimit returns the bytes of memory this process may use at most: the
// smallest of the machine's memory, the cgroup's memory.max and the
// address-space limit (ulimit -v), or 0 when none is known.
func MemoryLimit() uint64 {
	var limit uint64
	lower := func(n uint64) {
		if n > 0 && (limit == 0 || n < limit) {
			limit = n
		}
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				if kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64); err == nil {
					lower(kb << 10)
				}
			}
		}
		f.Close()
	}
	if data, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64); err == nil {
			lower(n)
		}
	}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_AS, &rl) == nil && rl.Cur != ^uint64(0) { // RLIM_INFINITY is all ones
		lower(rl.Cur)
	}
	return limit
}
