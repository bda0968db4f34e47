package llamacpp

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// AvailableMemory returns the bytes this process can still allocate, and
// whether that is known: the least of the kernel's estimate of memory
// available without swapping (MemAvailable), what the process's cgroup may
// still use (v2 memory.max - memory.current, v1 limit - usage), and what its
// address-space limit (RLIMIT_AS) leaves beside its current mappings.
// NewContext and NewBatch check their sizes against it.
func AvailableMemory() (uint64, bool) {
	avail, ok := meminfoAvailable()
	lower := func(v uint64) {
		if !ok || v < avail {
			avail, ok = v, true
		}
	}
	if limit, ok1 := readUint("/sys/fs/cgroup/memory.max"); ok1 {
		if used, ok2 := readUint("/sys/fs/cgroup/memory.current"); ok2 {
			lower(limit - min(used, limit))
		}
	} else if limit, ok1 := readUint("/sys/fs/cgroup/memory/memory.limit_in_bytes"); ok1 {
		if used, ok2 := readUint("/sys/fs/cgroup/memory/memory.usage_in_bytes"); ok2 {
			lower(limit - min(used, limit))
		}
	}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_AS, &rl) == nil && rl.Cur != ^uint64(0) {
		if size, ok1 := virtualSize(); ok1 {
			lower(rl.Cur - min(size, rl.Cur))
		}
	}
	return avail, ok
}

func meminfoAvailable() (uint64, bool) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if rest, found := strings.CutPrefix(sc.Text(), "MemAvailable:"); found {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// readUint reads a file holding one number ("max" and anything else: false).
func readUint(path string) (uint64, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	return v, err == nil
}

// virtualSize is the process's address-space size (VmSize in bytes).
func virtualSize() (uint64, bool) {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(data))
	if len(f) < 1 {
		return 0, false
	}
	pages, err := strconv.ParseUint(f[0], 10, 64)
	return pages * uint64(os.Getpagesize()), err == nil
}
