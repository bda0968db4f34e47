package mirostat

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingModel favours the token after the last one seen (mod n), so the
// output depends on the context; it records every context it is shown.
type countingModel struct {
	n      int
	seen   [][]int32
	failAt int // call index that fails; -1 never
}

func (m *countingModel) next(tokens []int32) ([]float32, error) {
	m.seen = append(m.seen, append([]int32(nil), tokens...))
	if len(m.seen)-1 == m.failAt {
		return nil, errors.New("backend down")
	}
	row := make([]float32, m.n)
	last := int32(0)
	if len(tokens) > 0 {
		last = tokens[len(tokens)-1]
	}
	row[(int(last)+1)%m.n] = 6 // surprise ≈ 0.05 bits: V2 at tau 1 keeps it alone
	return row, nil
}

type fixedDraws struct {
	u     []float64
	drawn int
}

func (f *fixedDraws) Float64() float64 { f.drawn++; return f.u[(f.drawn-1)%len(f.u)] }

func TestGenerate(t *testing.T) {
	ctx := context.Background()
	m := &countingModel{n: 8, failAt: -1}
	s := mustNew(t, Config{Version: V2, Tau: 1, Eta: 0})
	g, err := s.Generate(ctx, m.next, &fixedDraws{u: []float64{0.5}}, GenerateOptions{Prompt: []int32{3}, MaxTokens: 4})
	require.NoError(t, err)
	assert.Equal(t, []int32{4, 5, 6, 7}, g.Tokens)
	assert.Equal(t, StopLimit, g.Reason)
	assert.Len(t, g.Steps, 4)
	assert.Equal(t, [][]int32{{3}, {3, 4}, {3, 4, 5}, {3, 4, 5, 6}}, m.seen, "the model sees prompt then output")

	// End token: included, and it stops the generation.
	m = &countingModel{n: 8, failAt: -1}
	g, err = s.Generate(ctx, m.next, &fixedDraws{u: []float64{0.5}}, GenerateOptions{MaxTokens: 10, EndTokens: []int32{3}})
	require.NoError(t, err)
	assert.Equal(t, []int32{1, 2, 3}, g.Tokens)
	assert.Equal(t, StopEndToken, g.Reason)

	// Observer stops after the token it refuses; an end token wins the reason.
	g, err = s.Generate(ctx, (&countingModel{n: 8, failAt: -1}).next, &fixedDraws{u: []float64{0.5}},
		GenerateOptions{MaxTokens: 10, Observer: func(st Step) bool { return st.Token != 2 }})
	require.NoError(t, err)
	assert.Equal(t, []int32{1, 2}, g.Tokens)
	assert.Equal(t, StopObserver, g.Reason)
	g, err = s.Generate(ctx, (&countingModel{n: 8, failAt: -1}).next, &fixedDraws{u: []float64{0.5}},
		GenerateOptions{MaxTokens: 10, EndTokens: []int32{2}, Observer: func(Step) bool { return false }})
	require.NoError(t, err)
	assert.Equal(t, []int32{1}, g.Tokens)
	assert.Equal(t, StopObserver, g.Reason)
	assert.Equal(t, StopEndToken.String(), "end token")
}

func TestGenerateErrorsKeepPriorSteps(t *testing.T) {
	ctx := context.Background()
	s := mustNew(t, Config{Version: V1, Tau: 1, Eta: 0.1})
	draws := &fixedDraws{u: []float64{0.25}}
	g, err := s.Generate(ctx, (&countingModel{n: 8, failAt: 2}).next, draws, GenerateOptions{MaxTokens: 10})
	require.Error(t, err)
	assert.Len(t, g.Tokens, 2)
	assert.Equal(t, StopReason(0), g.Reason)
	assert.Equal(t, 2, s.Steps())
	assert.Equal(t, 2, draws.drawn, "no draw is taken without a row")

	// An invalid row becomes a *RowError for its step.
	calls := 0
	bad := func([]int32) ([]float32, error) {
		calls++
		if calls == 3 {
			return []float32{float32(math.Inf(1))}, nil
		}
		return []float32{0, 1}, nil
	}
	s.Reset()
	g, err = s.Generate(ctx, bad, draws, GenerateOptions{MaxTokens: 10})
	var re *RowError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 2, re.Row)
	assert.Len(t, g.Steps, 2)
	assert.Equal(t, 2, s.Steps())

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.Generate(canceled, bad, draws, GenerateOptions{MaxTokens: 3})
	assert.ErrorIs(t, err, context.Canceled)
	_, err = s.Generate(ctx, bad, draws, GenerateOptions{})
	assert.ErrorIs(t, err, ErrInvalidParameter)
	_, err = s.Generate(ctx, nil, draws, GenerateOptions{MaxTokens: 1})
	assert.ErrorIs(t, err, ErrInvalidParameter)
}

func TestStream(t *testing.T) {
	ctx := context.Background()
	s := mustNew(t, Config{Version: V2, Tau: 1, Eta: 0})
	var got []int32
	for st, err := range s.Stream(ctx, (&countingModel{n: 5, failAt: -1}).next, &ParkMiller{}, GenerateOptions{MaxTokens: 100, EndTokens: []int32{0}}) {
		require.NoError(t, err)
		got = append(got, st.Token)
	}
	assert.Equal(t, []int32{1, 2, 3, 4, 0}, got)

	got = got[:0]
	for st, err := range s.Stream(ctx, (&countingModel{n: 5, failAt: -1}).next, &ParkMiller{}, GenerateOptions{MaxTokens: 100}) {
		require.NoError(t, err)
		got = append(got, st.Token)
		if len(got) == 3 {
			break
		}
	}
	assert.Equal(t, []int32{1, 2, 3}, got)
}
