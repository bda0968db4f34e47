package mirostat

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

// rowErrors are the errors a step may return for a bad row or draw.
var rowErrors = []error{ErrEmptyRow, ErrAllMasked, ErrNonFiniteLogit, ErrInvalidUniform,
	ErrInvalidProbability, ErrInvalidParameter, ErrNumerical}

func isRowError(err error) bool {
	for _, e := range rowErrors {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func fuzzConfig(version uint8, tau, eta, mu float64, m uint8) Config {
	return Config{Version: Version(version%3 + 1), Tau: tau, Eta: eta, Mu: mu, M: int(m)} // Version 3 is invalid
}

// checkStep asserts what every successful step satisfies, given the state
// before it.
func checkStepInvariants(t *testing.T, s *Sampler, before State, st Step, n int, masked func(int) bool) {
	t.Helper()
	cfg := s.Config()
	switch {
	case st.Token < 0 || int(st.Token) >= n || masked(int(st.Token)):
		t.Fatalf("token %d of %d, masked %v", st.Token, n, st.Token >= 0 && int(st.Token) < n && masked(int(st.Token)))
	case st.Kept < 1 || st.Kept > n:
		t.Fatalf("kept %d of %d", st.Kept, n)
	case cfg.Version == V1 && (st.K < 1 || st.K > n || st.Kept > st.K):
		t.Fatalf("k %d, kept %d, n %d", st.K, st.Kept, n)
	case !(st.Prob >= 0 && st.Prob <= 1+1e-12):
		t.Fatalf("prob %v", st.Prob)
	case math.IsNaN(st.Surprise) || math.IsInf(st.Surprise, 0) || st.Surprise < -1e-9:
		t.Fatalf("surprise %v", st.Surprise)
	case st.MuBefore != before.Mu || st.Mu != before.Mu-cfg.Eta*(st.Surprise-cfg.Tau):
		t.Fatalf("mu %v -> %v with surprise %v", st.MuBefore, st.Mu, st.Surprise)
	case s.State() != (State{Mu: st.Mu, Steps: before.Steps + 1}):
		t.Fatalf("state %+v after step %+v", s.State(), st)
	}
}

func FuzzSampleLogits(f *testing.F) {
	add := func(row []float32, u float64, version uint8, tau, eta, mu float64, m uint8) {
		b := make([]byte, 4*len(row))
		for i, x := range row {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		f.Add(b, u, version, tau, eta, mu, m)
	}
	add(logitsOf(0.5, 0.3, 0.2), 0.7, 1, 1.0, 0.1, 0.0, 0)
	add(logitsOf(0.5, 0.3, 0.2), 0.7, 0, 0.5, 0.1, 0.0, 0)
	add([]float32{float32(math.Inf(-1)), 2, 2, float32(math.NaN())}, 0.3, 1, 3, 1, 0, 0)
	add([]float32{1e38, -1e38, 0, float32(math.Inf(-1))}, 0.999, 0, 0.1, 5, -50, 2)
	add(zipfRow(300, 1.1), 0.5, 0, 5, 0.1, 0, 0)
	f.Fuzz(func(t *testing.T, data []byte, u float64, version uint8, tau, eta, mu float64, m uint8) {
		row := make([]float32, len(data)/4)
		for i := range row {
			row[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		cfg := fuzzConfig(version, tau, eta, mu, m)
		s, err := New(cfg)
		if err != nil {
			if !errors.Is(err, ErrInvalidParameter) {
				t.Fatalf("config error %v", err)
			}
			return
		}
		twin := s.Clone()
		before := s.State()
		st, err := s.SampleLogits(row, u)
		if err != nil {
			if !isRowError(err) {
				t.Fatalf("unexpected error %v", err)
			}
			if s.State() != before {
				t.Fatalf("state changed on error: %+v -> %+v", before, s.State())
			}
			return
		}
		checkStepInvariants(t, s, before, st, len(row), func(i int) bool { return math.IsInf(float64(row[i]), -1) })

		// The same step through a prepared row, and through candidates and
		// Observe.
		p, err := PrepareLogits(row)
		if err != nil {
			t.Fatalf("prepare failed on a row that sampled: %v", err)
		}
		if got, err := twin.Clone().Sample(p, u); err != nil || got != st {
			t.Fatalf("prepared %+v %v, direct %+v", got, err, st)
		}
		c, err := twin.Candidates(Logits(row))
		if err != nil || len(c.Tokens) != st.Kept || c.Index(st.Token) < 0 {
			t.Fatalf("candidates %v %v for step %+v", c.Tokens, err, st)
		}
		if got, err := twin.Observe(Logits(row), st.Token); err != nil || got != st {
			t.Fatalf("observe %+v %v, sample %+v", got, err, st)
		}
	})
}

func FuzzSampleWeights(f *testing.F) {
	add := func(row []float64, u float64, version uint8, tau, eta, mu float64, m uint8) {
		b := make([]byte, 8*len(row))
		for i, x := range row {
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
		}
		f.Add(b, u, version, tau, eta, mu, m)
	}
	add([]float64{5, 3, 2}, 0.7, 1, 1.0, 0.1, 0.0, 0)
	add([]float64{0, 1, 1, 0}, 0.2, 0, 2, 0.5, 0, 3)
	add([]float64{math.MaxFloat64, math.MaxFloat64}, 0.2, 0, 2, 0.5, 0, 3)
	add([]float64{1e-300, 5e-324, 0, -1}, 0.2, 1, 2, 0.5, 0, 3)
	f.Fuzz(func(t *testing.T, data []byte, u float64, version uint8, tau, eta, mu float64, m uint8) {
		row := make([]float64, len(data)/8)
		for i := range row {
			row[i] = math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:]))
		}
		s, err := New(fuzzConfig(version, tau, eta, mu, m))
		if err != nil {
			return
		}
		twin := s.Clone()
		before := s.State()
		st, err := s.SampleWeights(row, u)
		if err != nil {
			if !isRowError(err) {
				t.Fatalf("unexpected error %v", err)
			}
			if s.State() != before {
				t.Fatalf("state changed on error")
			}
			return
		}
		checkStepInvariants(t, s, before, st, len(row), func(i int) bool { return row[i] == 0 })
		p, err := PrepareWeights(row)
		if err != nil {
			t.Fatalf("prepare failed on a row that sampled: %v", err)
		}
		if got, err := twin.Sample(p, u); err != nil || got != st {
			t.Fatalf("prepared %+v %v, direct %+v", got, err, st)
		}
	})
}
