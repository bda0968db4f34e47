package replay

import (
	"context"
	"testing"
	"time"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadProfile(t *testing.T) {
	p, err := LoadProfile("testdata/h200.json")
	require.NoError(t, err)
	require.Len(t, p.Models, 2)
	one := p.Models[1]
	assert.Equal(t, 128256, one.VocabSize)
	// The figure: 1.32 ms a step at one row.
	assert.Equal(t, 1320*time.Microsecond, one.StepDuration(1))
	// Interpolated between 2 (1.36) and 4 (1.45) rows, extrapolated past 16.
	assert.InDelta(t, 1.405, float64(one.StepDuration(3))/float64(time.Millisecond), 1e-9)
	assert.InDelta(t, 1.9+2*0.3/8, float64(one.StepDuration(18))/float64(time.Millisecond), 1e-5)
	assert.Equal(t, 1320*time.Microsecond, one.StepDuration(0))
	assert.Equal(t, 512*time.Second/25000, one.PromptDuration(512))
}

func TestProfileValidate(t *testing.T) {
	m := ModelProfile{Name: "m", VocabSize: 8, Steps: []StepTime{{1, 1}, {1, 2}}, PromptTokensPerS: 1}
	assert.ErrorContains(t, (&Profile{Models: []ModelProfile{m}}).Validate(), "rows must increase")
	assert.ErrorContains(t, (&Profile{}).Validate(), "no models")
	m.Steps = nil
	assert.ErrorContains(t, (&Profile{Models: []ModelProfile{m}}).Validate(), "no steps")
}

func TestBackendWaitsAndReturnsRows(t *testing.T) {
	m := ModelProfile{Name: "m", VocabSize: 1000, Steps: []StepTime{{1, 2}, {2, 3}}, PromptTokensPerS: 10000}
	b, err := New(m, 2)
	require.NoError(t, err)
	ctx := context.Background()

	feeds := []backend.Feed{{Slot: 0, Tokens: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}, {Slot: 1, Tokens: []int32{7}}}
	want := 1*time.Millisecond + 2*time.Millisecond // 10 prompt tokens at 10000 t/s, one one-row step
	assert.Equal(t, want, b.Duration(feeds))
	start := time.Now()
	require.NoError(t, b.Eval(ctx, feeds))
	assert.GreaterOrEqual(t, time.Since(start), want)

	// Rows are the fixed model's: Zipf-shaped, one entry of log-probability
	// rank 1 at 0 (plus noise), all others below.
	row := b.Logits(0)
	require.Len(t, row, 1000)
	top := 0
	for i, v := range row {
		if v > row[top] {
			top = i
		}
	}
	assert.InDelta(t, 0, row[top], 0.05)
	again, err := New(m, 2)
	require.NoError(t, err)
	require.NoError(t, again.Eval(ctx, feeds))
	assert.Equal(t, row, again.Logits(0), "the same history gives the same row")
	assert.Nil(t, b.Logits(2))

	require.NoError(t, b.Copy(1, 0))
	require.NoError(t, b.Clear(0))
	assert.Error(t, b.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: []int32{1000}}}))
	assert.ErrorIs(t, b.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: []int32{1000}}}), backend.ErrTokenOutOfRange)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, b.Eval(cancelled, []backend.Feed{{Slot: 0, Tokens: []int32{1}}}), context.Canceled)
}

func TestEvalDoesNotSpin(t *testing.T) {
	// A 20 ms wait must leave the core free: the process's CPU time stays
	// far below the wall time.
	m := ModelProfile{Name: "m", VocabSize: 16, Steps: []StepTime{{1, 20}}, PromptTokensPerS: 1}
	b, err := New(m, 1)
	require.NoError(t, err)
	before := cpuTime()
	start := time.Now()
	require.NoError(t, b.Eval(context.Background(), []backend.Feed{{Slot: 0, Tokens: []int32{3}}}))
	wall := time.Since(start)
	assert.GreaterOrEqual(t, wall, 20*time.Millisecond)
	if c := cpuTime(); c >= 0 {
		assert.Less(t, c-before, wall/2)
	}
}

func TestSpinningEvalSpinsAtTheEnd(t *testing.T) {
	// A 20 ms spinning wait sleeps, then spins its last spinLead: its CPU
	// time is far below the wall time, and at least part of spinLead (a
	// busy machine may take some of the spin's core).
	m := ModelProfile{Name: "m", VocabSize: 16, Steps: []StepTime{{1, 20}}, PromptTokensPerS: 1}
	b, err := New(m, 1)
	require.NoError(t, err)
	b.Wait = Spin
	before := cpuTime()
	start := time.Now()
	require.NoError(t, b.Eval(context.Background(), []backend.Feed{{Slot: 0, Tokens: []int32{3}}}))
	wall := time.Since(start)
	assert.GreaterOrEqual(t, wall, 20*time.Millisecond)
	if c := cpuTime(); c >= 0 {
		assert.Less(t, c-before, wall/2)
		assert.Greater(t, c-before, spinLead/10)
	}
	assert.Equal(t, "spinning", Spin.String())
	assert.Equal(t, "sleeping", Sleep.String())
}
