package mirostat

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func replayFixture(seed uint64, n int) ([][]float32, []float64) {
	r := rand.New(rand.NewPCG(seed, 0))
	rows := make([][]float32, n)
	draws := make([]float64, n)
	for i := range rows {
		rows[i] = randomRow(r, 50+r.IntN(200))
		draws[i] = r.Float64()
	}
	return rows, draws
}

func TestReplayIsDeterministic(t *testing.T) {
	rows, draws := replayFixture(1, 200)
	for _, v := range []Version{V1, V2} {
		cfg := Config{Version: v, Tau: 4, Eta: 0.2}
		a, err := mustNew(t, cfg).Replay(rows, draws)
		require.NoError(t, err)
		b, err := mustNew(t, cfg).Replay(rows, draws)
		require.NoError(t, err)
		require.Len(t, a, 200)
		assert.Equal(t, a, b)
		// Each step starts from the previous mu.
		for i := 1; i < len(a); i++ {
			require.Equal(t, a[i-1].Mu, a[i].MuBefore)
		}
	}
}

func TestReplayFailureInTheMiddle(t *testing.T) {
	rows, draws := replayFixture(2, 10)
	rows[6] = []float32{1, float32(math.NaN())}
	cfg := Config{Version: V2, Tau: 4, Eta: 0.2}

	s := mustNew(t, cfg)
	steps, err := s.Replay(rows, draws)
	var re *RowError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 6, re.Row)
	assert.ErrorIs(t, err, ErrNonFiniteLogit)
	require.Len(t, steps, 6, "rows before the failure stay committed")
	assert.Equal(t, State{Mu: steps[5].Mu, Steps: 6}, s.State())

	s = mustNew(t, cfg)
	before := s.State()
	steps, err = s.ReplayAtomic(rows, draws)
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 6, re.Row)
	assert.Nil(t, steps)
	assert.Equal(t, before, s.State(), "atomic replay restores the sampler")

	_, err = s.Replay(rows, draws[:3])
	assert.ErrorIs(t, err, ErrInvalidParameter)
	assert.Equal(t, before, s.State())
}

func TestBatchAtomicRestoresEverySession(t *testing.T) {
	rows, draws := replayFixture(3, 5)
	samplers := make([]*Sampler, 5)
	for i := range samplers {
		samplers[i] = mustNew(t, Config{Version: Version(1 + i%2), Tau: 2 + float64(i), Eta: 0.3})
		_, err := samplers[i].SampleLogits(rows[i], 0.5) // sessions in mid-flight
		require.NoError(t, err)
	}
	snapshot := func() []State {
		out := make([]State, len(samplers))
		for i, s := range samplers {
			out[i] = s.State()
		}
		return out
	}
	before := snapshot()

	bad := append([][]float32(nil), rows...)
	bad[3] = nil // empty row in the middle
	dst := make([]Step, 1, 8)
	out, err := SampleBatchAtomic(dst, samplers, bad, draws)
	var re *RowError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 3, re.Row)
	assert.ErrorIs(t, err, ErrEmptyRow)
	assert.Len(t, out, 1, "dst comes back unchanged")
	assert.Equal(t, before, snapshot())

	// The non-atomic batch keeps sessions 0..2.
	out, err = SampleBatch(nil, samplers, bad, draws)
	require.ErrorAs(t, err, &re)
	require.Len(t, out, 3)
	after := snapshot()
	for i := range 3 {
		assert.Equal(t, before[i].Steps+1, after[i].Steps)
	}
	assert.Equal(t, before[3:], after[3:])

	// A successful batch equals the sessions stepping one by one.
	clones := make([]*Sampler, len(samplers))
	for i, s := range samplers {
		clones[i] = s.Clone()
	}
	out, err = SampleBatchAtomic(nil, samplers, rows, draws)
	require.NoError(t, err)
	for i, c := range clones {
		want, err := c.SampleLogits(rows[i], draws[i])
		require.NoError(t, err)
		assert.Equal(t, want, out[i])
	}

	_, err = SampleBatch(nil, samplers, rows[:2], draws)
	assert.ErrorIs(t, err, ErrInvalidParameter)
	_, err = SampleBatch(nil, []*Sampler{nil}, rows[:1], draws[:1])
	assert.ErrorIs(t, err, ErrInvalidParameter)
}

// A sampler listed twice steps twice; an atomic rollback undoes both.
func TestBatchAtomicWithRepeatedSampler(t *testing.T) {
	s := mustNew(t, Config{Version: V2, Tau: 3, Eta: 0.5})
	before := s.State()
	row := logitsOf(0.5, 0.3, 0.2)
	_, err := SampleBatchAtomic(nil, []*Sampler{s, s, s}, [][]float32{row, row, nil}, []float64{0.7, 0.1, 0.5})
	require.Error(t, err)
	assert.Equal(t, before, s.State())
	out, err := SampleBatchAtomic(nil, []*Sampler{s, s}, [][]float32{row, row}, []float64{0.7, 0.1})
	require.NoError(t, err)
	assert.Equal(t, out[0].Mu, out[1].MuBefore)
	assert.Equal(t, 2, s.Steps())
}

func TestSampleShared(t *testing.T) {
	row := zipfRow(3000, 1.1)
	p, err := PrepareLogits(row)
	require.NoError(t, err)
	samplers := []*Sampler{
		mustNew(t, Config{Version: V1, Tau: 3, Eta: 0.1}),
		mustNew(t, Config{Version: V2, Tau: 5, Eta: 0.1}),
	}
	clones := []*Sampler{samplers[0].Clone(), samplers[1].Clone()}
	out, err := SampleShared(nil, samplers, p, []float64{0.3, 0.8})
	require.NoError(t, err)
	for i, c := range clones {
		want, err := c.SampleLogits(row, []float64{0.3, 0.8}[i])
		require.NoError(t, err)
		assert.Equal(t, want, out[i])
	}
	before := []State{samplers[0].State(), samplers[1].State()}
	_, err = SampleShared(nil, samplers, p, []float64{0.3, 1.5})
	var re *RowError
	require.ErrorAs(t, err, &re)
	assert.ErrorIs(t, err, ErrInvalidUniform)
	assert.Equal(t, before, []State{samplers[0].State(), samplers[1].State()})
	_, err = SampleShared(nil, samplers, nil, []float64{0.3, 0.5})
	assert.ErrorIs(t, err, ErrInvalidParameter)
}
