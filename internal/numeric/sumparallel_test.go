package numeric

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// ExpSumParallel, its rows split into parts of any length for 2 to 9 workers, gives ExpSum's bits on
// rows of every range, masked or not, with NaN, of every length.
func TestExpSumParallelEqualsExpSum(t *testing.T) {
	defer func(n, p int, f func() int) { expChunkLen, expPartLen, expWorkers = n, p, f }(expChunkLen, expPartLen, expWorkers)
	r := rand.New(rand.NewPCG(41, 42))
	for iter := range 400 {
		n := 1 + r.IntN(40000)
		scale := []float64{1e-6, 1, 2, 10, 40, 300, 1e4}[r.IntN(7)]
		offset := []float64{0, -50, 1e3, -1e4}[r.IntN(4)]
		masked := []float64{0, 0, 0.5, 0.99}[r.IntN(4)]
		row := randomRow(r, n, scale, offset, masked)
		if iter%9 == 0 {
			row[r.IntN(n)] = float32(math.NaN())
		}
		m := math.Inf(-1)
		for _, x := range row {
			if x == x {
				m = max(m, float64(x))
			}
		}
		want := ExpSum(row, m)
		workers := 2 + r.IntN(8)
		expChunkLen, expPartLen, expWorkers = 1, 1+r.IntN(n), func() int { return workers }
		got := ExpSumParallel(row, m)
		if math.IsNaN(want) {
			require.True(t, math.IsNaN(got), "iter %d", iter)
			continue
		}
		require.Equal(t, math.Float64bits(want), math.Float64bits(got), "iter %d: n %d, scale %v, parts of %d", iter, n, scale, expPartLen)
	}
}

func TestExpSumParallelAllocatesNothing(t *testing.T) {
	defer func(n, p int, f func() int) { expChunkLen, expPartLen, expWorkers = n, p, f }(expChunkLen, expPartLen, expWorkers)
	expChunkLen, expPartLen, expWorkers = 1, 100, func() int { return 4 }
	row := randomRow(rand.New(rand.NewPCG(1, 1)), 1000, 2, 0, 0.1)
	ExpSumParallel(row, 20)
	require.Zero(t, testing.AllocsPerRun(50, func() { ExpSumParallel(row, 20) }))
}
