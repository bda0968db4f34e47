package numeric

import (
	"sync"

	"github.com/llamaloop/llamaloop/internal/numeric/parallel"
)

// expChunkLen is the fewest entries ExpSumParallel splits, and expPartLen
// the entries of a part: a few microseconds of work, so that the caller,
// which takes every part no worker has taken yet, loses little to a worker
// that wakes late. Variables so that tests can split small rows.
var (
	expChunkLen = 1 << 14
	expPartLen  = 2 * SumBlock
	expWorkers  = parallel.Workers
)

// expBlocks holds the block sums of one row, computed in parts of whole blocks.
type expBlocks struct {
	row   []float32
	m     float64
	sums  []float64
	parts int
	run   parallel.Runner
}

var expBlocksPool = sync.Pool{New: func() any { return new(expBlocks) }}

// Do sums the blocks of part p.
func (t *expBlocks) Do(p int) {
	n := len(t.sums)
	for b := p * n / t.parts; b < (p+1)*n/t.parts; b++ {
		t.sums[b] = blockSum(t.row[b*SumBlock:min((b+1)*SumBlock, len(t.row))], t.m)
	}
}

// ExpSumParallel returns ExpSum(row, m) to the last bit. On a machine with several cores it sums
// the blocks of a wide row on several of them and adds the blocks' sums in order on the
// caller's, in parts of a few blocks.
func ExpSumParallel(row []float32, m float64) float64 {
	if expWorkers() < 2 || len(row) < expChunkLen {
		return ExpSum(row, m)
	}
	parts := (len(row) + expPartLen - 1) / expPartLen
	t := expBlocksPool.Get().(*expBlocks)
	blocks := (len(row) + SumBlock - 1) / SumBlock
	if cap(t.sums) < blocks {
		t.sums = make([]float64, blocks)
	}
	t.row, t.m, t.sums, t.parts = row, m, t.sums[:blocks], min(parts, blocks)
	t.run.Run(t.parts, t)
	z := 0.0
	for _, s := range t.sums {
		z += s
	}
	t.row = nil
	expBlocksPool.Put(t)
	return z
}
