package numeric

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// randomRow is a row of n logits of the given scale around offset, a share of them masked, its
// largest entry at a random place.
func randomRow(r *rand.Rand, n int, scale, offset, masked float64) []float32 {
	row := make([]float32, n)
	for i := range row {
		row[i] = float32(offset + scale*r.NormFloat64())
		if r.Float64() < masked {
			row[i] = float32(math.Inf(-1))
		}
	}
	row[r.IntN(n)] = float32(offset + 10*scale) // at least one unmasked, and the largest
	return row
}

// ExpSum against a float64 brute force with math.Exp, on rows of every range, masked or not, up to
// 262144 entries: within 1e-12 relative. ExpSumAt over the unmasked entries gives the same bits,
// and so does the
// normalizer's order written plainly (laneOrderSum).
func TestExpSumAccuracy(t *testing.T) { forEachLevel(t, testExpSumAccuracy) }

func testExpSumAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for iter := range 60 {
		n := []int{1, 2, 3, 17, 1000, 32000, 128256, 262144}[iter%8]
		scale := []float64{1e-6, 1, 2, 10, 40, 300, 1e4}[r.IntN(7)]
		offset := []float64{0, -50, 1e3, -1e4}[r.IntN(4)]
		masked := []float64{0, 0, 0.5, 0.99}[r.IntN(4)]
		row := randomRow(r, n, scale, offset, masked)
		m := math.Inf(-1)
		for _, x := range row {
			m = max(m, float64(x))
		}
		var want, c float64 // Neumaier's compensated sum: an index-order sum is off by 1e-11 at n = 128256
		var idx []int32
		for i, x := range row {
			want, c = neumaier(want, c, math.Exp(float64(x)-m))
			if !math.IsInf(float64(x), -1) {
				idx = append(idx, int32(i))
			}
		}
		want += c
		got := ExpSum(row, m)
		require.InEpsilon(t, want, got, 1e-12, "iter %d n=%d scale %v", iter, n, scale)
		require.Equal(t, got, ExpSumAt(row, idx, m), "iter %d", iter)
		require.Equal(t, got, laneOrderSum(row, m), "iter %d", iter)
		assert.InDelta(t, m+math.Log(want), LogSumExp(row), 1e-12*max(1, math.Abs(m)))
	}
}

func TestLogSumExp(t *testing.T) {
	ninf, inf, nan := float32(math.Inf(-1)), float32(math.Inf(1)), float32(math.NaN())
	// ln(e^0 + e^ln3) = ln 4.
	assert.InDelta(t, math.Log(4), LogSumExp([]float32{0, float32(math.Log(3)), ninf}), 1e-7)
	assert.InDelta(t, 1000+math.Log(2), LogSumExp([]float32{1000, 1000}), 1e-12)
	assert.Equal(t, math.Inf(-1), LogSumExp(nil))
	assert.Equal(t, math.Inf(-1), LogSumExp([]float32{ninf, ninf}))
	assert.Equal(t, math.Inf(1), LogSumExp([]float32{1, inf, 2}))
	assert.True(t, math.IsNaN(LogSumExp([]float32{1, nan})))
	assert.True(t, math.IsNaN(LogSumExp([]float32{inf, nan})))
}

// The sum adds nothing per call to the heap.
func TestExpSumDoesNotAllocate(t *testing.T) {
	row := randomRow(rand.New(rand.NewPCG(1, 1)), 4096, 3, 0, 0.1)
	assert.Zero(t, testing.AllocsPerRun(10, func() { _ = LogSumExp(row) }))
}

// laneOrderSum is ExpSum written plainly from its documentation: Term by Term, lane i mod 8 of
// each block of 4096, the lanes of a block folded as two 4-wide vectors, the blocks in order.
func laneOrderSum(row []float32, m float64) float64 {
	z := 0.0
	for lo := 0; lo < len(row); lo += 4096 {
		var l [8]float64
		for i := lo; i < min(lo+4096, len(row)); i++ {
			l[i%8] += Term(float64(row[i]) - m)
		}
		z += ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]))
	}
	return z
}

// specialRow is a row of n entries that mixes every case of Term: ordinary terms, -Inf, NaN,
// +Inf, entries just above and below ExpFloor, far below it, above m.
func specialRow(r *rand.Rand, n int, m float64) []float32 {
	row := make([]float32, n)
	for i := range row {
		switch r.IntN(12) {
		case 0:
			row[i] = float32(math.Inf(-1))
		case 1:
			row[i] = float32(m + ExpFloor + (r.Float64()-0.5)*0.02) // either side of the floor
		case 2:
			row[i] = float32(m - 1e4*r.Float64() - 700)
		case 3:
			row[i] = float32(m + r.Float64()) // above m: Term's formula
		case 4:
			if r.IntN(20) == 0 {
				row[i] = float32([]float64{math.NaN(), math.Inf(1)}[r.IntN(2)])
				break
			}
			fallthrough
		default:
			row[i] = float32(m - 30*r.Float64())
		}
	}
	return row
}

// Every vector loop the machine has adds the same terms as Term in the same lanes: every length
// up to 70 at every offset into a larger row, rows of every case Term has, several starting
// lanes.
func TestAddLanesEqualsTerms(t *testing.T) {
	forEachLevel(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(7, 8))
		for iter := range 3000 {
			m := []float64{0, 12.5, -3e3, 1e4}[iter%4]
			n := iter % 71
			off := r.IntN(9)
			row := specialRow(r, n+off, m)[off:]
			var start lanes
			for j := range start {
				start[j] = r.Float64()
			}
			want, got := start, start
			for i := range n / SumLanes * SumLanes {
				want[i%SumLanes] += Term(float64(row[i]) - m)
			}
			took := addLanes(&got, row, m)
			require.Equal(t, n/SumLanes*SumLanes, took)
			require.Equal(t, fmtLanes(want), fmtLanes(got), "iter %d: %v", iter, row)
			goLanes := start
			addLanesGo(&goLanes, row, m)
			require.Equal(t, fmtLanes(want), fmtLanes(goLanes), "iter %d", iter)
		}
	})
}

// forEachLevel runs f with each of the normalizer's loops this machine has forced: the Go loop,
// AVX2 and AVX-512 (on amd64 without the purego tag).
func forEachLevel(t *testing.T, f func(t *testing.T)) {
	defer func(l int) { sumLevel = l }(sumLevel)
	for l := levelGo; l <= machineLevel; l++ {
		sumLevel = l
		t.Run([]string{"go", "avx2", "avx512"}[l], f)
	}
}

func fmtLanes(l lanes) [SumLanes]uint64 {
	var b [SumLanes]uint64
	for j, x := range l {
		if math.IsNaN(x) {
			x = math.NaN()
		}
		b[j] = math.Float64bits(x)
	}
	return b
}

// ExpSum gives laneOrderSum's bits on rows of every case, of lengths across block boundaries.
func TestExpSumSpecialRows(t *testing.T) {
	forEachLevel(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(9, 10))
		for iter := range 200 {
			n := []int{1, 7, 8, 9, 4095, 4096, 4097, 8200, 20000}[iter%9]
			row := specialRow(r, n, 5)
			want, got := laneOrderSum(row, 5), ExpSum(row, 5)
			if math.IsNaN(want) {
				require.True(t, math.IsNaN(got))
				continue
			}
			require.Equal(t, math.Float64bits(want), math.Float64bits(got), "iter %d n %d", iter, n)
		}
	})
}

// neumaier adds x to the compensated sum (s, c): the sum is s + c.
func neumaier(s, c, x float64) (float64, float64) {
	t := s + x
	if math.Abs(s) >= math.Abs(x) {
		c += (s - t) + x
	} else {
		c += (x - t) + s
	}
	return t, c
}

// BenchmarkExpSum is the normalizer of a row of 128256 logits (bench-1b's vocabulary): the
// vector loop, the portable loop, and split over the machine's cores.
func BenchmarkExpSum(b *testing.B) {
	row := randomRow(rand.New(rand.NewPCG(3, 4)), 128256, 3, 0, 0)
	m := math.Inf(-1)
	for _, x := range row {
		m = max(m, float64(x))
	}
	defer func(l int) { sumLevel = l }(sumLevel)
	for l := levelAVX2; l <= machineLevel; l++ {
		b.Run([]string{"go", "avx2", "avx512"}[l], func(b *testing.B) {
			sumLevel = l
			for b.Loop() {
				ExpSum(row, m)
			}
		})
	}
	sumLevel = machineLevel
	b.Run("portable", func(b *testing.B) {
		for b.Loop() {
			var l lanes
			for lo := 0; lo < len(row); lo += SumBlock {
				addLanesGo(&l, row[lo:lo+min(SumBlock, len(row)-lo)], m)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		for b.Loop() {
			ExpSumParallel(row, m)
		}
	})
}

// Terms stores Term's bits, with every loop the machine has, at every length and offset.
func TestTermsEqualsTerm(t *testing.T) {
	forEachLevel(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(11, 12))
		for iter := range 2000 {
			m := []float64{0, 12.5, -3e3, 1e4}[iter%4]
			n, off := iter%75, r.IntN(9)
			row := specialRow(r, n+off, m)[off:]
			got := make([]float64, n+1)
			got[n] = 42
			Terms(got, row, m)
			for i, x := range row {
				want := Term(float64(x) - m)
				if math.IsNaN(want) {
					require.True(t, math.IsNaN(got[i]), "iter %d entry %d", iter, i)
					continue
				}
				require.Equal(t, math.Float64bits(want), math.Float64bits(got[i]), "iter %d entry %d of %d: %v", iter, i, n, x)
			}
			require.Equal(t, 42.0, got[n], "past the row")
		}
	})
}
