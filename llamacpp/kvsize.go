package llamacpp

import (
	"fmt"
	"strconv"

	"github.com/llamaloop/llamaloop/cgo"
)

// readKVShape reads the hyperparameters that size a context's KV cache.
// The shape is known only where the estimate is a lower bound of what
// llama.cpp allocates in host memory: attention layers with a full-length
// cache of uniform width, on the CPU.
func readKVShape(c cgo.Model, info ModelInfo, gpuLayers int) kvShape {
	arch := info.Architecture
	has := func(key string) bool { _, ok := c.MetaValStr(arch + "." + key); return ok }
	if c.IsRecurrent() || has("attention.sliding_window") || has("attention.kv_lora_rank") ||
		(gpuLayers != 0 && cgo.SupportsGPUOffload()) || info.Heads <= 0 || info.HeadsKV <= 0 || info.Layers <= 0 {
		return kvShape{}
	}
	width := func(key string) int {
		if s, ok := c.MetaValStr(arch + ".attention." + key); ok {
			if v, err := strconv.Atoi(s); err == nil && v > 0 {
				return v
			}
		}
		return info.Embd / info.Heads
	}
	return kvShape{known: true, layers: info.Layers, kWidth: width("key_length") * info.HeadsKV,
		vWidth: width("value_length") * info.HeadsKV, heads: info.Heads, vocab: info.VocabSize}
}

// kvTypeBytes is the size of one cached element of ggml type t, in
// thirty-seconds of a byte, and the type's name; -1 is llama.cpp's default,
// f16.
func kvTypeBytes(t int32) (num uint64, name string) {
	for name, k := range kvTypes {
		if k.ggml == t {
			return uint64(k.size), string(name)
		}
	}
	return 32 * 2, "f16"
}

// check refuses a context whose KV cache, or whose KV cache with the
// compute buffers of its micro-batches, does not fit in the memory
// available, naming the option to lower; cp holds the effective values of p.
// It returns the bytes it estimates for the context (0 when unknown).
func (s kvShape) check(p ContextParams, cp cgo.ContextParams) (int64, error) {
	if !s.known {
		return 0, nil
	}
	cells := (uint64(cp.NCtx) + 255) / 256 * 256 // llama.cpp pads n_ctx to 256
	kb, kName := kvTypeBytes(cp.TypeK)
	vb, vName := kvTypeBytes(cp.TypeV)
	kv := cells * uint64(s.layers) * (uint64(s.kWidth)*kb + uint64(s.vWidth)*vb) / 32
	size := "ContextSize " + strconv.Itoa(int(cp.NCtx))
	if p.ContextSize == 0 {
		size += " (the default)"
	}
	if err := checkMemory(kv, size, fmt.Sprintf("of KV cache (%s keys, %s values, %s)", kName, vName, plural(s.layers, "layer"))); err != nil {
		return 0, err
	}
	// A micro-batch's graph holds its logits, its attention mask over the
	// whole cache (f16 at least) and, without flash attention, every head's
	// attention scores.
	ub := uint64(cp.NUbatch)
	compute := ub*uint64(s.vocab)*4 + ub*cells*2
	if cp.FlashAttn == 0 {
		compute += ub * cells * uint64(s.heads) * 4
	}
	batch := fmt.Sprintf("MicroBatchSize %d", cp.NUbatch)
	switch {
	case p.MicroBatchSize == 0 && p.BatchSize != 0:
		batch = fmt.Sprintf("BatchSize %d", cp.NBatch)
	case p.MicroBatchSize == 0:
		batch = fmt.Sprintf("BatchSize %d (the default)", cp.NBatch)
	}
	if err := checkMemory(kv+compute, batch+" with "+size,
		fmt.Sprintf("(KV cache %s, compute buffers %s)", FormatBytes(kv), FormatBytes(compute))); err != nil {
		return 0, err
	}
	return int64(kv + compute), nil
}

// plural writes "1 layer", "3 layers".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
