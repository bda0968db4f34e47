package numeric

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// Shift gives the bits of the plain float32 loop, in place or not, at every length up to 70 and
// on rows of every case (NaN, ±Inf, subnormals, values that round).
func TestShiftEqualsLoop(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 1e-42, -0, math.MaxFloat32}
	for iter := range 2000 {
		n := iter % 71
		src := make([]float32, n)
		for i := range src {
			src[i] = float32(r.NormFloat64() * 20)
			if r.IntN(10) == 0 {
				src[i] = special[r.IntN(len(special))]
			}
		}
		m, c := float32(r.NormFloat64()*30), float32(r.NormFloat64()*10)
		want := make([]float32, n)
		for i, x := range src {
			want[i] = (x - m) - c
		}
		got := make([]float32, n+1)
		Shift(got, src, m, c)
		require.Equal(t, bitsOf(want), bitsOf(got[:n]), "iter %d", iter)
		require.Zero(t, got[n])
		Shift(src, src, m, c)
		require.Equal(t, bitsOf(want), bitsOf(src), "iter %d in place", iter)
	}
}

func bitsOf(row []float32) []uint32 {
	b := make([]uint32, len(row))
	for i, x := range row {
		b[i] = math.Float32bits(x)
		if x != x {
			b[i] = 0x7fc00000 // any NaN
		}
	}
	return b
}

func BenchmarkShift(b *testing.B) {
	row := randomRow(rand.New(rand.NewPCG(3, 4)), 128256, 3, 0, 0)
	dst := make([]float32, len(row))
	for b.Loop() {
		Shift(dst, row, 7, 11.5)
	}
}
