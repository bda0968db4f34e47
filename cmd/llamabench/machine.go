package main

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/llamaloop/llamaloop/internal/cli"
	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/llamaloop/llamaloop/llamacpp"
)

// machine describes where the benchmark ran.
type machine struct {
	OS    string `json:"os"`
	Arch  string `json:"arch"`
	CPU   string `json:"cpu"`
	Cores int    `json:"cores"`
	GPUs  []gpu  `json:"gpus"`
	// Bandwidth is the measured memory bandwidth in bytes/s (0: not
	// measured): bytes read plus bytes written per second by a parallel copy.
	Bandwidth  float64 `json:"memory_bandwidth_bytes_per_s"`
	SystemInfo string  `json:"llama_cpp_system_info"`
	// Build says which of the CPU's vector features llama.cpp was not
	// compiled for: a portable (baseline) build when any.
	Build buildFeatures `json:"build"`
	// LastLevelCache is CPU 0's largest cache (zero when unknown).
	LastLevelCache cpuCache `json:"last_level_cache"`
}

// cpuCacheDir is where Linux describes CPU 0's caches.
const cpuCacheDir = "/sys/devices/system/cpu/cpu0/cache"

type gpu struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	MemoryBytes uint64 `json:"memory_bytes"`
}

func describeMachine() machine {
	m := machine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPU: cpuModel(), Cores: runtime.NumCPU(),
		GPUs: []gpu{}, SystemInfo: strings.TrimSpace(llamacpp.SystemInfo()), Build: detectBuild(), LastLevelCache: lastLevelCache(cpuCacheDir)}
	for _, d := range cli.GPUs() {
		m.GPUs = append(m.GPUs, gpu{Name: d.Name, Description: d.Description, MemoryBytes: d.TotalMemory})
	}
	return m
}

// cpuModel reads the CPU's name from /proc/cpuinfo (Linux) or sysctl
// (macOS); "unknown" elsewhere.
func cpuModel() string {
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			key, val, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(key) {
			case "model name", "Model", "cpu model", "Hardware":
				if v := strings.TrimSpace(val); v != "" {
					return v
				}
			}
		}
	}
	if runtime.GOOS == "darwin" {
		if out, err := exec.Command("sysctl", "-n", "machdep.cpu.brand_string").Output(); err == nil {
			return strings.TrimSpace(string(out))
		}
	}
	return "unknown"
}

// measureBandwidth copies size bytes between two buffers, split over every
// core, best of runs, and returns the bytes read plus written per second.
func measureBandwidth(size, runs int) float64 {
	if size <= 0 {
		return 0
	}
	src := make([]byte, size)
	dst := make([]byte, size)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src) // fault every page in before timing
	workers := runtime.GOMAXPROCS(0)
	chunk := (size + workers - 1) / workers
	best := time.Duration(1<<63 - 1)
	for range runs {
		var wg sync.WaitGroup
		start := time.Now()
		for w := range workers {
			lo, hi := w*chunk, min((w+1)*chunk, size)
			if lo >= hi {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				copy(dst[lo:hi], src[lo:hi])
			}()
		}
		wg.Wait()
		best = min(best, time.Since(start))
	}
	return 2 * float64(size) / best.Seconds()
}

// bytesPerToken is how many bytes of weights one decoded token reads: every
// tensor but the token embedding, of which a token reads one row, unless
// the embedding is also the output head (tied weights). It falls back to
// the whole weight size when the file cannot be read.
func bytesPerToken(path string, weights uint64) uint64 {
	r, err := gguf.Open(path)
	if err != nil {
		return weights
	}
	defer r.Close()
	f := r.File
	if _, untied := f.Tensor("output.weight"); !untied {
		return weights
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok {
		return weights
	}
	n, err := emb.Size()
	if err != nil || n >= weights {
		return weights
	}
	return weights - n
}
