// Package llamatest is what the llama.cpp-backed tests of every package
// share: where a test model's layers run, and how close llama.cpp's logits
// must come to the float64 reference forward pass on that device.
//
// The GPU test mode (`make test-gpu`) sets LLAMALOOP_TEST_GPU_LAYERS; tests
// pass ModelParams to llamacpp.LoadModel, which itself never reads the
// environment.
package llamatest

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/llamaloop/llamaloop/llamacpp"
)

// GPULayersEnv names the environment variable holding the number of layers
// that tests offload to a GPU: -1 for all of them, 0 (the default) for none.
const GPULayersEnv = "LLAMALOOP_TEST_GPU_LAYERS"

// GPULayers reads GPULayersEnv. It fails the test on a malformed value, and
// when layers are asked for but no GPU backend is registered: a GPU test run
// that silently ran on the CPU would prove nothing.
func GPULayers(tb testing.TB) int {
	tb.Helper()
	n, err := gpuLayers()
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

func gpuLayers() (int, error) {
	s := os.Getenv(GPULayersEnv)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < -1 {
		return 0, fmt.Errorf("%s=%q: want -1 (every layer), 0 (none) or a layer count", GPULayersEnv, s)
	}
	if n != 0 && !hasGPU() {
		return 0, fmt.Errorf("%s=%d but ggml sees no GPU: build a GPU backend (make cuda) and set %s to its folder",
			GPULayersEnv, n, llamacpp.BackendDirEnv)
	}
	return n, nil
}

func hasGPU() bool {
	for _, d := range llamacpp.Devices() {
		if d.Type == llamacpp.DeviceGPU || d.Type == llamacpp.DeviceIGPU {
			return true
		}
	}
	return false
}

// ModelParams returns p with the test mode's GPU layer count.
func ModelParams(tb testing.TB, p llamacpp.ModelParams) llamacpp.ModelParams {
	tb.Helper()
	p.GPULayers = GPULayers(tb)
	return p
}

// OnGPU reports whether the test mode offloads layers to a GPU.
func OnGPU(tb testing.TB) bool {
	tb.Helper()
	return GPULayers(tb) != 0
}

// Check names a comparison with its own tolerance.
type Check string

// The comparisons whose tolerance depends on the device.
const (
	// TinyF32 compares the random tiny model with f32 weights, in a context
	// with an f32 KV cache and flash attention off, with the reference
	// (absolute logit units; the logits' standard deviation is about 3).
	TinyF32 Check = "tiny-f32"
	// TinyF16 is TinyF32 with f16 weights.
	TinyF16 Check = "tiny-f16"
	// Prefix is the prefix-dependent oracle model, like TinyF32.
	Prefix Check = "prefix"
	// DefaultContext is TinyF32 in llama.cpp's default context: an f16 KV
	// cache and flash attention chosen by llama.cpp.
	DefaultContext Check = "default-context"
	// T5 compares the tiny encoder-decoder model (f32 weights, f32 KV
	// cache, flash attention off) with the reference: its decoder logits
	// after the encoder and cross-attention.
	T5 Check = "t5"
	// BeamLogProb is the largest difference between a beam hypothesis's
	// log-probability on llama.cpp and on the reference backend (natural log
	// units, sums over up to 16 steps).
	BeamLogProb Check = "beam-logprob"
)

// The tolerances are about twice the largest difference measured on each
// device: the CPU figures on this project's machines, the GPU figures on
// an NVIDIA H200 with every layer offloaded (CUDA 13). The llamacpp package
// doc explains why the GPU is less exact with f32 weights (TF32 tensor cores).
var tolerances = map[Check][2]float64{ // {CPU, GPU}
	TinyF32:        {1e-4, 4e-2}, // measured 1.5e-5, 1.9e-2
	TinyF16:        {3e-2, 7e-2}, // measured 9.9e-3, 3.4e-2
	Prefix:         {2e-5, 7e-3}, // measured 1.7e-6, 3.5e-3
	DefaultContext: {5e-2, 5e-2}, // measured 1.5e-2, 1.8e-2
	BeamLogProb:    {1e-3, 5e-3}, // measured < 1e-3, 2e-3
	T5:             {1e-5, 4e-2}, // measured 4.4e-6 (CPU); the GPU figure is tiny-f32's, not yet measured on t5
}

// Tolerance is the largest difference from the reference that check may
// show on the test mode's device.
func Tolerance(tb testing.TB, check Check) float64 {
	tb.Helper()
	t, ok := tolerances[check]
	if !ok {
		tb.Fatalf("llamatest: no tolerance for %q", check)
	}
	if OnGPU(tb) {
		return t[1]
	}
	return t[0]
}
