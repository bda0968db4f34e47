package mirostat

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/benchrows"
)

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
		for _, n := range benchrows.Vocabularies {
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
	for _, n := range benchrows.Vocabularies {
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

// BenchmarkSideRows replays the side-by-side benchmark's steps (tau 5, eta
// 0.1, m 100) from a fresh sampler; run it with -benchtime 100x to match.
// The rows' peaks have low surprise, so mu climbs and the candidates grow
// from a few to the whole vocabulary within about 100 steps.
func BenchmarkSideRows(b *testing.B) {
	for _, v := range []Version{V1, V2} {
		for _, n := range benchrows.Vocabularies {
			b.Run(fmt.Sprintf("%v/n=%d", v, n), func(b *testing.B) {
				rows := benchrows.Rows(4, n)
				s, err := New(Config{Version: v, Tau: 5, Eta: 0.1, M: 100})
				if err != nil {
					b.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(7, 8))
				kept, i := 0, 0
				b.ReportAllocs()
				cpuLoop(b, func() {
					st, err := s.SampleLogits(rows[i%len(rows)], rng.Float64())
					if err != nil {
						b.Fatal(err)
					}
					kept += st.Kept
					i++
				})
				b.ReportMetric(float64(kept)/float64(b.N), "kept/op")
			})
		}
	}
}
