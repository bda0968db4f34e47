package testmodel

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"runtime"
	"strings"
	"sync"

	"github.com/llamaloop/llamaloop/internal/gguf"
)

// TinySpec returns the spec of the tiny random model: 3 layers, n_embd 256
// in 4 heads of 64 with 2 key/value heads, n_ff 512, context 2048, RoPE base
// 10000, RMS eps 1e-5, the TinyVocab with ChatML tokens, weights of the given
// type (gguf.TensorF32 or gguf.TensorF16). Head width 64 keeps llama.cpp's
// GPU flash-attention kernels applicable.
func TinySpec(weights gguf.TensorType) Spec {
	name := "llamaloop-tiny-f32"
	if weights == gguf.TensorF16 {
		name = "llamaloop-tiny-f16"
	}
	return Spec{
		Name: name, NEmbd: 256, NLayer: 3, NHead: 4, NHeadKV: 2, NFF: 512, NCtxTrain: 2048,
		RopeFreqBase: 10000, RMSEps: 1e-5, WeightType: weights, Seed: 1, Vocab: TinyVocab(true),
	}
}

// BenchSmallSpec returns the spec of "bench-small": about 110M weights
// (n_embd 768, 12 layers, 12 heads, n_ff 2048, vocabulary 32000), F16.
func BenchSmallSpec() Spec {
	v, err := BenchVocab(32000)
	if err != nil {
		panic(err) // the base vocabulary is far below 32000 tokens
	}
	return Spec{
		Name: "llamaloop-bench-small", NEmbd: 768, NLayer: 12, NHead: 12, NHeadKV: 12, NFF: 2048, NCtxTrain: 4096,
		RopeFreqBase: 10000, RMSEps: 1e-5, WeightType: gguf.TensorF16, Seed: 100, Vocab: v,
	}
}

// Bench1BSpec returns the spec of "bench-1b", shaped like Llama 3.2 1B:
// n_embd 2048, 16 layers, 32 heads, 8 key/value heads, n_ff 8192, vocabulary
// 128256, tied embeddings (1.24B weights), RoPE base 500000, F16.
func Bench1BSpec() Spec {
	v, err := BenchVocab(128256)
	if err != nil {
		panic(err) // the base vocabulary is far below 128256 tokens
	}
	return Spec{
		Name: "llamaloop-bench-1b", NEmbd: 2048, NLayer: 16, NHead: 32, NHeadKV: 8, NFF: 8192, NCtxTrain: 8192,
		RopeFreqBase: 500000, RMSEps: 1e-5, WeightType: gguf.TensorF16, Tied: true, Seed: 1000, Vocab: v,
	}
}

// WriteRandom writes a model with seeded uniform random weights to path. The
// same spec always gives the same file. Weights are scaled so activations stay
// O(1) and logits have a standard deviation of about 3: embeddings have
// standard deviation 1 (3/sqrt(n_embd) when tied, as they are the output
// head too), norms are uniform in [0.8, 1.2], attention Q and K 1.5/sqrt(n_embd),
// the other matrices 1/sqrt(fan-in), the output head 3/sqrt(n_embd). Data is
// generated in parallel and streamed: memory stays far below the file size.
func WriteRandom(path string, s Spec) error {
	if err := s.validate(); err != nil {
		return err
	}
	return writeModel(path, s, Random{s}.Fingerprint(), randomTensors(s))
}

// randomTensors are WriteRandom's tensors of s.
func randomTensors(s Spec) []tensor {
	d, f := float64(s.NEmbd), float64(s.NFF)
	var tensors []tensor
	for _, r := range s.roles() {
		info := gguf.TensorInfo{Name: r.name, Type: s.WeightType, Shape: r.shape}
		if r.norm {
			info.Type = gguf.TensorF32
		}
		center, std := 0.0, 1/math.Sqrt(d)
		switch {
		case r.norm:
			center, std = 1, 0.2/math.Sqrt(3)
		case r.name == nameTokEmbd && s.Tied:
			std = 3 / math.Sqrt(d)
		case r.name == nameTokEmbd:
			std = 1
		case r.name == nameOutput:
			std = 3 / math.Sqrt(d)
		case strings.HasSuffix(r.name, "attn_q.weight"), strings.HasSuffix(r.name, "attn_k.weight"):
			std = 1.5 / math.Sqrt(d)
		case strings.HasSuffix(r.name, "ffn_down.weight"):
			std = 1 / math.Sqrt(f)
		}
		u := uniform{seed: s.Seed ^ nameHash(r.name), center: center, halfWidth: std * math.Sqrt(3)}
		tensors = append(tensors, tensor{info: info, fill: func(w *gguf.Writer) error {
			return u.write(w, info.Type, info.Elements())
		}})
	}
	return tensors
}

func nameHash(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

// splitmix64 advances x and returns the next output of Steele, Lea and
// Flood's SplitMix64 generator.
func splitmix64(x *uint64) uint64 {
	*x += 0x9e3779b97f4a7c15
	z := *x
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// uniform draws values center + halfWidth*((k+0.5)/32768 - 1) for 16-bit
// random k. Element i of a tensor comes from the generator of its chunk
// (i >> chunkBits), seeded from seed and the chunk index, so chunks can be
// generated in parallel and the values do not depend on the scheduling.
type uniform struct {
	seed      uint64
	center    float64
	halfWidth float64
}

const chunkBits = 16

func (u uniform) value(k uint16) float32 {
	return float32(u.center + u.halfWidth*((float64(k)+0.5)/32768-1))
}

// fillChunk writes chunk c's values (n of them, n <= 1<<chunkBits) into buf,
// encoded by the lookup table: 2 or 4 bytes per value.
func (u uniform) fillChunk(c uint64, n int, table []uint32, width int, buf []byte) {
	state := u.seed ^ (c+1)*0xd1342543de82ef95
	for i := 0; i < n; i += 4 {
		r := splitmix64(&state)
		for j := 0; j < 4 && i+j < n; j++ {
			v := table[uint16(r>>(16*j))]
			if width == 2 {
				binary.LittleEndian.PutUint16(buf[2*(i+j):], uint16(v))
			} else {
				binary.LittleEndian.PutUint32(buf[4*(i+j):], v)
			}
		}
	}
}

// write streams n values of the given type (F32 or F16) into w.
func (u uniform) write(w *gguf.Writer, typ gguf.TensorType, n uint64) error {
	width := 4
	if typ == gguf.TensorF16 {
		width = 2
	}
	table := make([]uint32, 1<<16)
	for k := range table {
		v := u.value(uint16(k))
		if width == 2 {
			table[k] = uint32(gguf.Float32ToFloat16(v))
		} else {
			table[k] = math.Float32bits(v)
		}
	}
	const chunk = 1 << chunkBits
	chunks := (n + chunk - 1) / chunk
	group := uint64(4 * runtime.GOMAXPROCS(0))
	bufs := make([][]byte, group)
	for i := range bufs {
		bufs[i] = make([]byte, chunk*width)
	}
	for first := uint64(0); first < chunks; first += group {
		last := min(first+group, chunks)
		var wg sync.WaitGroup
		for c := first; c < last; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				size := int(min(chunk, n-c*chunk))
				u.fillChunk(c, size, table, width, bufs[c-first])
			}()
		}
		wg.Wait()
		for c := first; c < last; c++ {
			size := int(min(chunk, n-c*chunk))
			if _, err := w.Write(bufs[c-first][:size*width]); err != nil {
				return err
			}
		}
	}
	return nil
}
