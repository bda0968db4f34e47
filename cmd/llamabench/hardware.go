package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/llamaloop/llamaloop/llamacpp"
)

// modelLabel is llama.cpp's description of a model ("llama ?B Q8_0") with
// the size class it cannot name replaced by the parameter count, as
// llama-bench's model_type names known models: "llama 45M Q8_0".
func modelLabel(desc string, params uint64) string {
	f := strings.Fields(desc)
	for i, w := range f {
		if w == "?B" && params > 0 {
			f[i] = paramLabel(params)
		}
	}
	return strings.Join(f, " ")
}

// paramLabel writes a parameter count as model names do: 45M, 1.2B, 7B.
func paramLabel(n uint64) string {
	trim := func(v float64, unit string) string {
		s := strconv.FormatFloat(v, 'f', 1, 64)
		return strings.TrimSuffix(s, ".0") + unit
	}
	switch {
	case n >= 1e9:
		return trim(float64(n)/1e9, "B")
	case n >= 1e6:
		return fmt.Sprintf("%.0fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.0fK", float64(n)/1e3)
	}
	return strconv.FormatUint(n, 10)
}

// cpuCache is the last-level cache that CPU 0 uses.
type cpuCache struct {
	Level int    `json:"level"`
	Bytes uint64 `json:"bytes"`
}

// lastLevelCache reads the largest data or unified cache level of CPU 0
// from dir (/sys/devices/system/cpu/cpu0/cache on Linux); the zero value
// when there is none to read.
func lastLevelCache(dir string) cpuCache {
	var best cpuCache
	entries, _ := filepath.Glob(filepath.Join(dir, "index*"))
	for _, e := range entries {
		read := func(name string) string {
			b, _ := os.ReadFile(filepath.Join(e, name))
			return strings.TrimSpace(string(b))
		}
		if t := read("type"); t != "Unified" && t != "Data" {
			continue
		}
		level, err := strconv.Atoi(read("level"))
		size := parseCacheSize(read("size"))
		if err != nil || size == 0 || level < best.Level {
			continue
		}
		best = cpuCache{Level: level, Bytes: size}
	}
	return best
}

// parseCacheSize reads sysfs's "32768K", "32M" or "1024".
func parseCacheSize(s string) uint64 {
	mult := uint64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0
	}
	return n * mult
}

// buildFeatures compares the CPU features the CPU backend was compiled for
// with the CPU's own.
type buildFeatures struct {
	// Unused are vector features the CPU has and the build does not use
	// (AVX2, AVX512...): a portable (baseline) build when not empty.
	Unused []string `json:"unused_cpu_features"`
}

func (b buildFeatures) portable() bool { return len(b.Unused) > 0 }

// note says so in a line under a table.
func (b buildFeatures) note() string {
	return fmt.Sprintf("portable build: llama.cpp was compiled for a baseline CPU and does not use this CPU's %s "+
		"(make build compiles for this CPU; a portable build loads kernels for it from make cpu-variants' libraries "+
		"with LLAMALOOP_BACKEND_DIR=build/lib)", strings.Join(b.Unused, ", "))
}

// ggmlCPUFlags maps the x86 features that llama.cpp's system info lists to
// their /proc/cpuinfo flags: the ones whose absence from a build costs
// speed.
var ggmlCPUFlags = []struct{ ggml, cpuinfo string }{
	{"AVX", "avx"}, {"AVX2", "avx2"}, {"F16C", "f16c"}, {"FMA", "fma"}, {"AVX_VNNI", "avx_vnni"},
	{"AVX512", "avx512f"}, {"AVX512_VBMI", "avx512vbmi"}, {"AVX512_VNNI", "avx512_vnni"},
	{"AVX512_BF16", "avx512_bf16"}, {"AMX_INT8", "amx_int8"},
}

// unusedFeatures lists the features of ggmlCPUFlags that cpuFlags (the CPU's
// /proc/cpuinfo flags) has and systemInfo (llama_print_system_info: "CPU :
// SSE3 = 1 | AVX = 1 | ...") does not list for the CPU backend.
func unusedFeatures(systemInfo string, cpuFlags []string) []string {
	// "CPU : SSE3 = 1 | AVX = 1 | CUDA : ARCHS = 900 | ...": a registry's
	// name opens each of its sections
	built, section := map[string]bool{}, ""
	for _, item := range strings.Split(systemInfo, "|") {
		if name, rest, ok := strings.Cut(item, " : "); ok {
			section, item = strings.TrimSpace(name), rest
		}
		k, v, ok := strings.Cut(item, "=")
		if ok && strings.HasPrefix(section, "CPU") && strings.TrimSpace(v) == "1" {
			built[strings.TrimSpace(k)] = true
		}
	}
	has := map[string]bool{}
	for _, f := range cpuFlags {
		has[f] = true
	}
	var out []string
	for _, f := range ggmlCPUFlags {
		if has[f.cpuinfo] && !built[f.ggml] {
			out = append(out, f.ggml)
		}
	}
	return out
}

// cpuInfoFlags reads the flags of the first processor in /proc/cpuinfo.
func cpuInfoFlags() []string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "flags" {
			return strings.Fields(v)
		}
	}
	return nil
}

// detectBuild compares this binary's llama.cpp with this CPU, once (x86 on
// Linux; elsewhere it reports nothing unused).
var detectBuild = sync.OnceValue(func() buildFeatures {
	if runtime.GOARCH != "amd64" {
		return buildFeatures{Unused: []string{}}
	}
	u := unusedFeatures(llamacpp.SystemInfo(), cpuInfoFlags())
	if u == nil {
		u = []string{}
	}
	return buildFeatures{Unused: u}
})
