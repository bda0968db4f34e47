// Package embedding holds what every layer that returns embeddings agrees
// on: how a sequence's per-token vectors become one vector ([Pooling], with
// llama.cpp's enum values) and how a vector is normalised ([Norm], with the
// codes of llama.cpp's embedding example, --embd-normalize). llamacpp pools
// on llama.cpp, the float64 reference pools the same way, and llamaserve
// names the pooling in its answers; all of them normalise through
// [Normalize]. It is pure Go.
package embedding

import (
	"fmt"
	"math"
	"strings"
)

// Pooling is how a sequence's per-token embeddings become one vector.
type Pooling int

// The pooling types. The zero value, PoolingModel, takes the model's own;
// the others are llama.cpp's enum llama_pooling_type plus one (see Llama).
const (
	// PoolingModel is the model's pooling: its GGUF key <arch>.pooling_type,
	// else llama.cpp's default for its architecture.
	PoolingModel Pooling = iota
	// PoolingNone keeps one vector per token.
	PoolingNone
	// PoolingMean averages every token's vector.
	PoolingMean
	// PoolingCLS takes the first token's vector (BERT's [CLS]).
	PoolingCLS
	// PoolingLast takes the last token's vector (the one that has attended
	// to all others in a causal model).
	PoolingLast
	// PoolingRank is a reranker's classification head; its output is a
	// score per class, not an embedding.
	PoolingRank
)

// Llama is the value of enum llama_pooling_type (-1 for PoolingModel,
// LLAMA_POOLING_TYPE_UNSPECIFIED).
func (p Pooling) Llama() int32 { return int32(p) - 1 }

// FromLlama is the Pooling of an enum llama_pooling_type value.
func FromLlama(v int32) Pooling { return Pooling(v + 1) }

var poolingNames = map[Pooling]string{PoolingModel: "model", PoolingNone: "none", PoolingMean: "mean",
	PoolingCLS: "cls", PoolingLast: "last", PoolingRank: "rank"}

// String is the pooling's name: model, none, mean, cls, last or rank.
func (p Pooling) String() string {
	if s, ok := poolingNames[p]; ok {
		return s
	}
	return fmt.Sprintf("Pooling(%d)", int(p))
}

// ParsePooling reads a name String gives ("first" is cls too).
func ParsePooling(s string) (Pooling, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	if name == "first" {
		return PoolingCLS, nil
	}
	for p, n := range poolingNames {
		if n == name {
			return p, nil
		}
	}
	return 0, fmt.Errorf("embedding: pooling %q (want model, none, mean, cls, last or rank)", cut(s))
}

// Norm is a normalisation, coded as llama.cpp's embedding example codes its
// --embd-normalize flag.
type Norm int

// The normalisations; a Norm above 2 is the p-norm of that order.
const (
	// NormNone leaves the vector as the model computed it.
	NormNone Norm = -1
	// NormMaxAbs scales the largest magnitude to 32760 (llama.cpp's "max
	// absolute int16").
	NormMaxAbs Norm = 0
	// NormL1 divides by the sum of magnitudes (taxicab).
	NormL1 Norm = 1
	// NormL2 divides by the Euclidean length: the default of llama.cpp's
	// embedding example and of OpenAI's embeddings, whose dot products are
	// then cosine similarities.
	NormL2 Norm = 2
)

// Normalize normalises v in place as llama.cpp's common_embd_normalize does
// (sums in float64); a zero vector stays zero. norm below NormNone is
// treated as NormNone.
func Normalize[T float32 | float64](v []T, norm Norm) {
	var sum float64
	switch {
	case norm < NormMaxAbs:
		return
	case norm == NormMaxAbs:
		for _, x := range v {
			sum = max(sum, math.Abs(float64(x)))
		}
		sum /= 32760
	case norm == NormL1:
		for _, x := range v {
			sum += math.Abs(float64(x))
		}
	case norm == NormL2:
		for _, x := range v {
			sum += float64(x) * float64(x)
		}
		sum = math.Sqrt(sum)
	default:
		p := float64(norm)
		for _, x := range v {
			sum += math.Pow(math.Abs(float64(x)), p)
		}
		sum = math.Pow(sum, 1/p)
	}
	scale := 0.0
	if sum > 0 {
		scale = 1 / sum
	}
	for i, x := range v {
		v[i] = T(float64(x) * scale)
	}
}

// Pool pools rows (one vector per token, in position order) as p says, in
// the arithmetic of T: the reference computation llama.cpp's pooling is
// checked against. PoolingNone and PoolingRank have no single vector and
// give an error, as does an empty sequence.
func Pool[T float32 | float64](rows [][]T, p Pooling) ([]T, error) {
	if len(rows) == 0 {
		return nil, fmt.Errorf("embedding: pooling an empty sequence")
	}
	switch p {
	case PoolingMean:
		out := make([]T, len(rows[0]))
		for _, r := range rows {
			for i, x := range r {
				out[i] += x
			}
		}
		for i := range out {
			out[i] /= T(len(rows))
		}
		return out, nil
	case PoolingCLS:
		return append([]T(nil), rows[0]...), nil
	case PoolingLast:
		return append([]T(nil), rows[len(rows)-1]...), nil
	}
	return nil, fmt.Errorf("embedding: pooling %s gives no single vector", p)
}

// cut shortens quoted input for an error message.
func cut(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}
