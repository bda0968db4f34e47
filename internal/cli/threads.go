package cli

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// ThreadsDefault is the help's default of --threads.
const ThreadsDefault = "the physical cores, fewer when the load average leaves fewer CPUs free"

// ThreadsGiven checks --threads when the command line gives it (CheckThreads);
// a command not given it has 0 threads until ResolveThreads.
func ThreadsGiven(fs *flag.FlagSet) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "threads" {
			n, _ := strconv.Atoi(f.Value.String())
			err = CheckThreads(n)
		}
	})
	return err
}

// ResolveThreads is the thread count of a --threads option: n when given,
// else the machine's DefaultThreads. line is a line for stderr, after the
// command's name: why the default is below the cores, or that the n given
// exceed the CPUs free ("" when there is nothing to say).
func ResolveThreads(n int) (threads int, line string) {
	m := ReadMachine()
	if n != 0 {
		if w := m.BusyWarning(n); w != "" {
			return n, "warning: " + w
		}
		return n, ""
	}
	n, note := m.DefaultThreads()
	if note != "" {
		note = "note: " + note
	}
	return n, note
}

// Machine is what the default thread count is chosen from: the CPUs this
// process may run on, the physical cores among them, and the 1-minute
// load average (LoadKnown false where the system does not say).
type Machine struct {
	CPUs, Cores int
	Load        float64
	LoadKnown   bool
}

// ReadMachine reads the machine: runtime.NumCPU, the cores of
// /sys/devices/system/cpu (Linux; elsewhere the CPUs) and /proc/loadavg.
func ReadMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU()}
	m.Cores = physicalCores("/sys/devices/system/cpu", m.CPUs)
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.Load, m.LoadKnown = parseLoad(string(data))
	}
	return m
}

// physicalCores scales cpus by the share of physical cores among the
// logical CPUs of sysfs (hyperthreads share a core); cpus when sysfs does
// not say.
func physicalCores(sysfs string, cpus int) int {
	dirs, _ := filepath.Glob(filepath.Join(sysfs, "cpu[0-9]*", "topology"))
	cores := map[string]bool{}
	for _, d := range dirs {
		pkg, err1 := os.ReadFile(filepath.Join(d, "physical_package_id"))
		core, err2 := os.ReadFile(filepath.Join(d, "core_id"))
		if err1 != nil || err2 != nil {
			return cpus
		}
		cores[strings.TrimSpace(string(pkg))+"/"+strings.TrimSpace(string(core))] = true
	}
	if len(dirs) == 0 || len(cores) == 0 {
		return cpus
	}
	return max(1, int(math.Round(float64(cpus)*float64(len(cores))/float64(len(dirs)))))
}

func parseLoad(s string) (float64, bool) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0, false
	}
	load, err := strconv.ParseFloat(f[0], 64)
	return load, err == nil && load >= 0
}

// free is the CPUs the load average leaves to this process, rounded to
// the nearest whole one.
func (m Machine) free() int { return int(math.Round(float64(m.CPUs) - m.Load)) }

// DefaultThreads is the thread count of a command not given --threads:
// the physical cores, as llama.cpp's default, but no more than the CPUs
// the load average leaves free, and at least 1. ggml's threads wait for
// each other at every step; one that a busy machine deschedules stalls all
// of them, which took the demo model from 4,680 tokens/s with one thread to
// 7 with two on a 2-CPU AMD EPYC at load 22 (README, "Threads"). note says
// why the count is below the cores ("" when it is not).
func (m Machine) DefaultThreads() (n int, note string) {
	n = max(m.Cores, 1)
	if m.LoadKnown && m.free() < n {
		n = max(m.free(), 1)
		return n, fmt.Sprintf("%s, not %d: the load average %.1f leaves %d of %d CPUs free (--threads N sets the count)",
			threadWord(n), m.Cores, m.Load, max(m.free(), 0), m.CPUs)
	}
	return n, ""
}

// BusyWarning warns when --threads n (more than 1) exceeds the CPUs the
// load average leaves free; "" otherwise.
func (m Machine) BusyWarning(n int) string {
	if n <= 1 || !m.LoadKnown || n <= m.free() {
		return ""
	}
	return fmt.Sprintf("--threads %d, and the load average %.1f leaves %d of %d CPUs free: threads that wait for descheduled ones can slow every step tenfold or more; fewer threads (--threads %d) avoid it",
		n, m.Load, max(m.free(), 0), m.CPUs, max(m.free(), 1))
}

func threadWord(n int) string {
	if n == 1 {
		return "1 thread"
	}
	return fmt.Sprintf("%d threads", n)
}
