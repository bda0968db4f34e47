package testmodel

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/llamaloop/llamaloop/internal/gguf"
)

// prefixHalf is the width of each half of the prefix oracle's embedding.
const prefixHalf = 64

// Prefix is an oracle model whose logits depend on the whole prefix, in
// closed form. It has one layer, n_embd 128 in two query heads of 64 that
// share one key/value head, and the TinyVocab with ChatML tokens.
//
// Token t embeds as Embd[t], which is zero in its second half. The query and
// key weights are zero, so every attention score is 0 and each position
// attends uniformly to itself and all earlier positions. The value weights
// copy the first half of the normed input, so the attention output of both
// heads is the mean m of the first halves of RMSNorm(Embd[t_j]) over the
// prefix; the output projection adds HistoryGain*m into the second half of
// the residual. The feed-forward weights are zero. Hence at position i
//
//	n_j    = Embd[t_j] / sqrt(mean(Embd[t_j]^2) + eps)
//	m      = (1/(i+1)) * sum_{j<=i} n_j[:64]
//	h      = Embd[t_i] + HistoryGain * (0, m)
//	logits = Out · (h / sqrt(mean(h^2) + eps) * OutNorm)
//
// Out's second half is proportional to the tokens' own embeddings, so
// tokens that fill the prefix gain logit. The logits are invariant to the
// order of the earlier tokens but not to their multiset.
type Prefix struct {
	// Spec describes the written model (F32).
	Spec Spec
	// Embd is the token embedding, row-major [vocab][128].
	Embd []float32
	// Out is the output head, row-major [vocab][128].
	Out []float32
	// OutNorm is the output norm weight.
	OutNorm []float32
	// HistoryGain scales the attention output into the residual.
	HistoryGain float32
}

// NewPrefix returns the prefix oracle with weights drawn from seed.
func NewPrefix(seed uint64) *Prefix {
	v := TinyVocab(true)
	spec := Spec{
		Name: "llamaloop-prefix-oracle", NEmbd: 2 * prefixHalf, NLayer: 1, NHead: 2, NHeadKV: 1, NFF: 64,
		NCtxTrain: 4096, RopeFreqBase: 10000, RMSEps: 1e-5, WeightType: gguf.TensorF32, Seed: seed, Vocab: v,
	}
	rng := rand.New(rand.NewPCG(seed, 0x707265666978))
	d, n := spec.NEmbd, v.Size()
	p := &Prefix{Spec: spec, Embd: make([]float32, n*d), Out: make([]float32, n*d), OutNorm: make([]float32, d),
		HistoryGain: float32(1 / math.Sqrt2)}
	sym := func(std float64) float32 { return float32(std * math.Sqrt(3) * (2*rng.Float64() - 1)) }
	for t := 0; t < n; t++ {
		for i := 0; i < prefixHalf; i++ {
			p.Embd[t*d+i] = sym(1)
		}
	}
	for t := 0; t < n; t++ {
		for i := 0; i < prefixHalf; i++ {
			p.Out[t*d+i] = sym(2 / math.Sqrt(prefixHalf))
			p.Out[t*d+prefixHalf+i] = 3.0 / prefixHalf * p.Embd[t*d+i]
		}
	}
	for i := range p.OutNorm {
		p.OutNorm[i] = float32(0.8 + 0.4*rng.Float64())
	}
	return p
}

// Write writes the model to path.
func (p *Prefix) Write(path string) error {
	s := p.Spec
	d, kv, f := s.NEmbd, s.NEmbdKV(), s.NFF
	ones := make([]float32, d)
	for i := range ones {
		ones[i] = 1
	}
	wv := make([]float32, kv*d) // rows: the kv outputs, each over the d inputs
	for i := 0; i < kv; i++ {
		wv[i*d+i] = 1
	}
	wo := make([]float32, d*d) // rows: the d outputs, each over the d head inputs
	for i := 0; i < prefixHalf; i++ {
		wo[(prefixHalf+i)*d+i] = p.HistoryGain
	}
	tensors, err := matrixTensors(s, map[string][]float32{
		nameTokEmbd:           p.Embd,
		nameOutput:            p.Out,
		nameOutputNorm:        p.OutNorm,
		blk(0, "attn_norm"):   ones,
		blk(0, "ffn_norm"):    ones,
		blk(0, "attn_q"):      make([]float32, d*d),
		blk(0, "attn_k"):      make([]float32, d*kv),
		blk(0, "attn_v"):      wv,
		blk(0, "attn_output"): wo,
		blk(0, "ffn_gate"):    make([]float32, d*f),
		blk(0, "ffn_up"):      make([]float32, d*f),
		blk(0, "ffn_down"):    make([]float32, d*f),
	})
	if err != nil {
		return err
	}
	return writeModel(path, s, p.Fingerprint(), tensors)
}

// Logits returns the exact logits at every position of tokens, by the closed
// form in the type's documentation.
func (p *Prefix) Logits(tokens []int32) ([][]float64, error) {
	d, n := p.Spec.NEmbd, p.Spec.Vocab.Size()
	eps := float64(p.Spec.RMSEps)
	rmsScale := func(x []float64) float64 {
		ss := 0.0
		for _, v := range x {
			ss += v * v
		}
		return 1 / math.Sqrt(ss/float64(len(x))+eps)
	}
	embd := func(t int32) []float64 {
		x := make([]float64, d)
		for i := range x {
			x[i] = float64(p.Embd[int(t)*d+i])
		}
		return x
	}
	sum := make([]float64, prefixHalf)
	out := make([][]float64, len(tokens))
	for i, t := range tokens {
		if t < 0 || int(t) >= n {
			return nil, fmt.Errorf("testmodel: token %d out of range [0, %d)", t, n)
		}
		x := embd(t)
		sc := rmsScale(x)
		for k := range sum {
			sum[k] += x[k] * sc
		}
		h := x
		for k := range sum {
			h[prefixHalf+k] += float64(p.HistoryGain) * sum[k] / float64(i+1)
		}
		sc = rmsScale(h)
		logits := make([]float64, n)
		for v := range logits {
			acc := 0.0
			for k := 0; k < d; k++ {
				acc += float64(p.Out[v*d+k]) * h[k] * sc * float64(p.OutNorm[k])
			}
			logits[v] = acc
		}
		out[i] = logits
	}
	return out, nil
}
