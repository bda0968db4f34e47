// Package llamacpp is the safe Go API over llama.cpp: models, contexts,
// batches, KV-cache sequences, logits views, vocabularies and devices.
//
// Every argument is checked in Go before it reaches C, because llama.cpp
// aborts the whole process on many misuses (a batch larger than n_batch, a
// sequence id beyond n_seq_max in the memory API, a token id outside the
// vocabulary in the per-token functions). Errors are values; nothing here
// panics on bad input.
//
// Lifetimes: a Model may be shared by many goroutines and many contexts; a
// Context, a Batch and the logits views a Context returns belong to one
// goroutine at a time. Close is idempotent on every type. A Model closed
// while contexts are open is freed when its last context closes, and one
// closed while other goroutines use its Vocab waits for their calls.
// Finalizers free what a program forgot to close, as a safety net only: the
// package accounts the C memory of models and contexts (NativeMemory) and
// starts a garbage collection when it has doubled, so that forgotten
// contexts do not pile up while the Go heap stays small.
//
// Sizes are checked before llama.cpp allocates: a KV cache, compute buffers
// or a batch larger than the memory the process can get gives ErrNoMemory,
// naming the option to lower.
//
// llama.cpp's and ggml's log output goes to a log/slog logger (SetLogger),
// quiet by default. GPU backends built as shared libraries (see `make cuda`)
// are loaded at start-up from the directory named by LLAMALOOP_BACKEND_DIR;
// a library that does not load costs one warning line, never the process:
// each is read and checked before the loader maps it (a regular ELF shared
// library of this machine, every segment within the file, ggml's entry
// points defined), so a truncated or corrupt file is skipped with the
// reason. A file changed between that check and the load is not covered.
//
// # Precision on a GPU
//
// On the CPU, a model with f32 weights in a context with an f32 KV cache and
// flash attention off computes in float32: its logits stay within about 1e-5
// of a float64 forward pass (logits of standard deviation 3). With its layers
// on CUDA the same model is only as exact as f16 weights (measured on an
// H200: 1.9e-2), because ggml's CUDA backend multiplies f32 matrices on TF32
// tensor cores, whose inputs keep 10 of float32's 23 mantissa bits: it puts
// its cuBLAS handles in TF32 mode (products of more than 16 tokens) and its
// own kernels for 2 to 16 tokens use TF32 instructions; only one-token
// products stay in float32. Flash attention on CUDA rounds K and V to f16 as
// well. No model or context parameter of llama.cpp changes this;
// NVIDIA_TF32_OVERRIDE=0 in the environment turns TF32 off in cuBLAS only,
// not in ggml's own kernels. Where float32 results matter (comparisons with a
// reference, reproducing a CPU run), keep the layers on the CPU (GPULayers 0).
package llamacpp

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/llamaloop/llamaloop/cgo"
)

// BackendDirEnv names the environment variable holding a directory of ggml
// backend libraries (libggml-cuda.so, libggml-vulkan.so, ...) that are loaded
// when the package first initialises llama.cpp.
const BackendDirEnv = "LLAMALOOP_BACKEND_DIR"

var (
	logger atomic.Pointer[slog.Logger]
	// llama.cpp's recent error lines, for the package's own error messages
	lastError struct {
		sync.Mutex
		lines []string
	}
	initOnce sync.Once
	// what CPUBackend reports
	cpuBackend = "built in"
)

// initialize sets up logging and llama.cpp's backends once per process.
func initialize() {
	initOnce.Do(func() {
		cgo.SetLogHandler(forwardLog)
		cgo.SetLogMinLevel(cgo.LogError)
		cgo.LogInstall()
		cgo.BackendInit()
		if dir := os.Getenv(BackendDirEnv); dir != "" {
			loadBackends(dir)
		}
	})
}

// loadBackends registers the ggml backend libraries in dir. A folder that
// holds none, and each library that does not load (a missing dependency, a
// library built from another ggml, a backend this machine cannot run), cost
// one warning line on the default slog logger and nothing more: llama.cpp
// then runs on the backends it has. Each library is checked in Go before
// ggml maps it (checkBackendLibrary: a file cut short would end the process
// in SIGBUS inside the loader).
func loadBackends(dir string) {
	paths, _ := filepath.Glob(filepath.Join(dir, "libggml-*"))
	found, cpuVariants := 0, 0
	loaded := make(map[cgo.Registry]string)
	for _, p := range paths {
		name := filepath.Base(p)
		// ggml-base is the backends' dependency, not a backend; versioned
		// names (libggml-cuda.so.0) are links to the library itself.
		if strings.HasPrefix(name, "libggml-base") || !isSharedLibrary(name) {
			continue
		}
		found++
		takeLastError()
		variant := strings.HasPrefix(name, "libggml-cpu-")
		if variant {
			cpuVariants++
		}
		if err := checkBackendLibrary(p); err != nil {
			slog.Warn(fmt.Sprintf("llamacpp: ggml backend %s not loaded: %v", p, err))
			continue
		}
		reg, ok := cgo.BackendLoad(p)
		if ok {
			loaded[reg] = p
			continue
		}
		reason := takeLastError()
		if variant && reason == "" {
			continue // a variant for instruction sets this CPU lacks
		}
		reason = strings.TrimPrefix(reason, "load_backend: ")
		if reason == "" {
			reason = "ggml says this machine cannot run it"
		}
		slog.Warn(fmt.Sprintf("llamacpp: ggml backend %s not loaded: %s", p, reason))
	}
	if found == 0 {
		slog.Warn(fmt.Sprintf("llamacpp: %s=%s holds no ggml backend library (libggml-NAME%s): running without it",
			BackendDirEnv, dir, sharedLibrarySuffix()))
	}
	keepBestCPUVariant(dir, cpuVariants, loaded)
	// The backends link the folder's own ggml-base, whose log would go to
	// stderr: route it where llama.cpp's goes.
	bases, _ := filepath.Glob(filepath.Join(dir, "libggml-base*"))
	for _, p := range bases {
		cgo.LogInstallLibrary(p)
	}
}

// keepBestCPUVariant leaves one CPU backend from libraries registered beside
// the built-in one. ggml ranks CPU variants (libggml-cpu-haswell.so,
// -skylakex, -icelake, ...) by how many of their instruction sets this CPU
// has, those it lacks refuse to load, and the built-in backend ranks last;
// llama.cpp computes with the first CPU device, so the best variant is the
// one that runs and the others are unloaded. Where none of the variants runs
// here, the built-in backend computes (one warning).
func keepBestCPUVariant(dir string, variants int, loaded map[cgo.Registry]string) {
	var cpus []cgo.Registry
	for i := range cgo.DeviceCount() {
		if d := cgo.DeviceGet(i); d.Type() == cgo.DeviceCPU {
			cpus = append(cpus, d.Registry())
		}
	}
	builtin := cgo.BuiltinCPURegistry()
	if len(cpus) > 0 && cpus[0] != builtin {
		cpuBackend = loaded[cpus[0]]
		for _, r := range cpus[1:] {
			if r != builtin {
				r.Unload()
			}
		}
		return
	}
	if variants > 0 {
		slog.Warn(fmt.Sprintf("llamacpp: none of the %d CPU variants in %s runs on this CPU: computing with the built-in CPU backend", variants, dir))
	}
}

func isSharedLibrary(name string) bool {
	return strings.HasSuffix(name, sharedLibrarySuffix())
}

func sharedLibrarySuffix() string {
	switch runtime.GOOS {
	case "darwin":
		return ".dylib"
	case "windows":
		return ".dll"
	}
	return ".so"
}

// SetLogger sends llama.cpp's log messages at or above level to l; a nil
// logger restores the default, which keeps only the most recent error for
// the package's own error messages.
func SetLogger(l *slog.Logger, level slog.Level) {
	initialize()
	logger.Store(l)
	min := cgo.LogError
	if l != nil {
		switch {
		case level <= slog.LevelDebug:
			min = cgo.LogDebug
		case level <= slog.LevelInfo:
			min = cgo.LogInfo
		case level <= slog.LevelWarn:
			min = cgo.LogWarn
		}
	}
	cgo.SetLogMinLevel(min)
}

func forwardLog(level int, text string) {
	defer func() { _ = recover() }() // never unwind through C frames
	text = strings.TrimRight(text, "\n")
	if level >= cgo.LogError && text != "" {
		lastError.Lock()
		if len(lastError.lines) == 4 {
			lastError.lines = append(lastError.lines[:0], lastError.lines[1:]...)
		}
		lastError.lines = append(lastError.lines, text)
		lastError.Unlock()
	}
	l := logger.Load()
	if l == nil || text == "" {
		return
	}
	lvl := slog.LevelInfo
	switch level {
	case cgo.LogDebug:
		lvl = slog.LevelDebug
	case cgo.LogWarn:
		lvl = slog.LevelWarn
	case cgo.LogError:
		lvl = slog.LevelError
	}
	l.Log(context.Background(), lvl, text, "source", "llama.cpp")
}

// takeLastError returns and forgets the error lines llama.cpp logged since
// the last call (at most the last four), most recent last. Messages of
// concurrent calls on other goroutines may mix in.
func takeLastError() string {
	lastError.Lock()
	defer lastError.Unlock()
	s := strings.Join(lastError.lines, "; ")
	lastError.lines = lastError.lines[:0]
	return s
}

// SystemInfo is llama.cpp's description of the CPU features it was built for.
func SystemInfo() string {
	initialize()
	return cgo.SystemInfo()
}

// CPUBackend says which CPU backend llama.cpp computes with: the one built
// into the program by the cgo flags, or the best of the CPU variants loaded
// from LLAMALOOP_BACKEND_DIR (see `make cpu-variants`), which lets a portable
// build run at this CPU's native speed.
func CPUBackend() string {
	initialize()
	return cpuBackend
}

// MaxSequences is the largest n_seq_max llama.cpp accepts (LLAMA_MAX_SEQ).
func MaxSequences() int { return cgo.MaxParallelSequences() }

// SupportsGPUOffload reports whether a GPU backend is available.
func SupportsGPUOffload() bool {
	initialize()
	return cgo.SupportsGPUOffload()
}

// DeviceType says what kind of device ggml sees.
type DeviceType string

// The device types of ggml_backend_dev_type.
const (
	DeviceCPU   DeviceType = "cpu"
	DeviceGPU   DeviceType = "gpu"
	DeviceIGPU  DeviceType = "igpu"
	DeviceAccel DeviceType = "accel"
)

// Device is one compute device that ggml sees.
type Device struct {
	Name        string
	Description string
	Type        DeviceType
	FreeMemory  uint64 // bytes
	TotalMemory uint64 // bytes
}

// Devices lists the devices of every registered backend, CPU included.
func Devices() []Device {
	initialize()
	n := cgo.DeviceCount()
	out := make([]Device, 0, n)
	for i := range n {
		d := cgo.DeviceGet(i)
		free, total := d.Memory()
		t := DeviceCPU
		switch d.Type() {
		case cgo.DeviceGPU:
			t = DeviceGPU
		case cgo.DeviceIGPU:
			t = DeviceIGPU
		case cgo.DeviceAccel:
			t = DeviceAccel
		}
		out = append(out, Device{Name: d.Name(), Description: d.Description(), Type: t, FreeMemory: free, TotalMemory: total})
	}
	return out
}
