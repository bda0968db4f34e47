package grammar

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestApplyAllowed checks the bitset masking (AVX2 where the machine has it, the word loop for
// the rest) against a plain loop over the tokens, for rows of every length up to a few words and a
// real vocabulary's, with words all allowed, all blocked and mixed.
func TestApplyAllowed(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	negInf := make([]float32, 200000)
	for i := range negInf {
		negInf[i] = float32(math.Inf(-1))
	}
	lengths := []int{0, 1, 7, 8, 9, 63, 64, 65, 127, 128, 129, 200, 511, 128256}
	for n := range 300 {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		for _, density := range []float64{0, 0.1, 0.5, 0.9, 1} {
			allowed := make([]uint64, (n+63)/64+1)
			for w := range allowed {
				switch rng.IntN(4) {
				case 0:
					allowed[w] = ^uint64(0)
				case 1:
					allowed[w] = 0
				default:
					for b := range 64 {
						if rng.Float64() < density {
							allowed[w] |= 1 << b
						}
					}
				}
			}
			row := make([]float32, n)
			want := make([]float32, n)
			for i := range row {
				row[i] = float32(rng.NormFloat64())
				want[i] = row[i]
				if allowed[i/64]&(1<<(i%64)) == 0 {
					want[i] = float32(math.Inf(-1))
				}
			}
			applyAllowed(row, allowed, negInf)
			require.Equal(t, want, row, "n %d, density %g", n, density)
		}
	}
}

// BenchmarkApplyDense times the masking of a row of 128256 scores with 30% of the tokens allowed
// at random, as the bitset (the matcher's form) and as the list of blocked tokens it replaced,
// side by side.
func BenchmarkApplyDense(b *testing.B) {
	const n = 128256
	rng := rand.New(rand.NewPCG(1, 2))
	allowed := make([]uint64, (n+63)/64)
	var blocked []int32
	for t := range n {
		if rng.Float64() < 0.3 {
			allowed[t/64] |= 1 << (t % 64)
		} else {
			blocked = append(blocked, int32(t))
		}
	}
	negInf := make([]float32, n)
	for i := range negInf {
		negInf[i] = float32(math.Inf(-1))
	}
	src := make([]float32, n)
	row := make([]float32, n)
	b.Run("bitset", func(b *testing.B) {
		for b.Loop() {
			copy(row, src)
			applyAllowed(row, allowed, negInf)
		}
	})
	b.Run("blocked-list", func(b *testing.B) {
		for b.Loop() {
			copy(row, src)
			for _, t := range blocked {
				row[t] = negInf[0]
			}
		}
	})
	b.Run("copy-only", func(b *testing.B) {
		for b.Loop() {
			copy(row, src)
		}
	})
}
