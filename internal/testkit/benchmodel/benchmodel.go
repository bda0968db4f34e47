// Package benchmodel finds and loads the benchmark-shaped model for the
// llama.cpp benchmarks of several packages.
package benchmodel

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/llamacpp"
)

// Env names a GGUF file to benchmark instead of the default.
const Env = "LLAMALOOP_BENCH_MODEL"

// Default is the model `make bench-models` writes, relative to the module root.
const Default = "build/models/bench-small-q8_0.gguf"

// Load loads the model named by Env, or Default found from the working
// directory upwards; the benchmark is skipped when there is none.
func Load(b *testing.B) *llamacpp.Model {
	b.Helper()
	path := os.Getenv(Env)
	if path == "" {
		path = find()
	}
	if _, err := os.Stat(path); err != nil {
		b.Skipf("no benchmark model at %q: run `make bench-models` first, or set %s", path, Env)
	}
	m, err := llamacpp.LoadModel(path, llamatest.ModelParams(b, llamacpp.ModelParams{}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	return m
}

func find() string {
	dir, err := os.Getwd()
	if err != nil {
		return Default
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, Default)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return Default
		}
		dir = parent
	}
}

// ThreadsEnv names the number of threads the llama.cpp benchmarks decode
// with.
const ThreadsEnv = "LLAMALOOP_BENCH_THREADS"

// Threads is the value of ThreadsEnv, or 1: ggml's spinning thread pool
// collapses when another process takes a core, so one thread keeps the
// ratios these benchmarks report stable on shared machines.
func Threads() int {
	if n, err := strconv.Atoi(os.Getenv(ThreadsEnv)); err == nil && n > 0 {
		return n
	}
	return 1
}
