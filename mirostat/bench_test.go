package mirostat

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

var benchVocabs = []int{32000, 128256, 262144}

// benchRow is a Zipf-shaped row (p ∝ rank^-1.1, as the paper finds for
// language models) with the ranks shuffled over the ids.
func benchRow(n int) []float32 {
	r := rand.New(rand.NewPCG(uint64(n), 1))
	row := make([]float32, n)
	for i, rank := range r.Perm(n) {
		row[i] = float32(-1.1*math.Log(float64(rank+1)) + 0.01*r.NormFloat64())
	}
	return row
}

// BenchmarkSampleLogits measures one steady-state step (tau 5, eta 0.1, the
// llama.cpp comparison's settings) on a fixed row, mu moving with the draws.
func BenchmarkSampleLogits(b *testing.B) {
	for _, v := range []Version{V1, V2} {
		for _, n := range benchVocabs {
			b.Run(fmt.Sprintf("%v/n=%d", v, n), func(b *testing.B) {
				row := benchRow(n)
				s, err := New(Config{Version: v, Tau: 5, Eta: 0.1})
				if err != nil {
					b.Fatal(err)
				}
				rng := &ParkMiller{}
				kept := 0
				b.ReportAllocs()
				cpuLoop(b, func() {
					st, err := s.SampleLogits(row, rng.Float64())
					if err != nil {
						b.Fatal(err)
					}
					kept += st.Kept
				})
				b.ReportMetric(float64(kept)/float64(b.N), "kept/op")
			})
		}
	}
}

func BenchmarkStats(b *testing.B) {
	for _, n := range benchVocabs {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			row := benchRow(n)
			cpuLoop(b, func() {
				if _, err := logitStats(row, nil); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkSamplePrepared measures a draw from a prepared row: a binary
// search instead of a pass over the row.
func BenchmarkSamplePrepared(b *testing.B) {
	for _, v := range []Version{V1, V2} {
		b.Run(fmt.Sprintf("%v/n=%d", v, 128256), func(b *testing.B) {
			p, err := PrepareLogits(benchRow(128256))
			if err != nil {
				b.Fatal(err)
			}
			s, err := New(Config{Version: v, Tau: 5, Eta: 0.1})
			if err != nil {
				b.Fatal(err)
			}
			rng := &ParkMiller{}
			b.ReportAllocs()
			cpuLoop(b, func() {
				if _, err := s.Sample(p, rng.Float64()); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
