package cli

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// AvailableMemory returns the bytes this process can still allocate
// without swapping or being refused: the smallest of the machine's
// available memory (MemAvailable), what the cgroup's memory.max leaves, and
// what the address-space limit (ulimit -v) leaves; 0 when none is known.
// The commands check the sizes they are asked for against it before
// llama.cpp or Go allocates them.
func AvailableMemory() uint64 {
	var avail uint64
	lower := func(n uint64) {
		if avail == 0 || n < avail {
			avail = n
		}
	}
	if kb, ok := procField("/proc/meminfo", "MemAvailable:"); ok {
		lower(kb << 10)
	}
	if max, err := readUint("/sys/fs/cgroup/memory.max"); err == nil {
		cur, _ := readUint("/sys/fs/cgroup/memory.current")
		lower(max - min(cur, max))
	}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_AS, &rl) == nil && rl.Cur != ^uint64(0) { // RLIM_INFINITY is all ones
		used, _ := procField("/proc/self/status", "VmSize:")
		lower(rl.Cur - min(used<<10, rl.Cur))
	}
	return avail
}

// procField reads the number of kB after key in a /proc file.
func procField(path, key string) (uint64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key); ok {
			n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// readUint reads a file holding one number ("max" is not one).
func readUint(path string) (uint64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
}
