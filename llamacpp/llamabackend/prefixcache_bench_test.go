package llamabackend_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/benchmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
	"github.com/llamaloop/llamaloop/prefixcache"
)

// turnTokens is the length of a chat turn's new tokens (the user's message
// and the template's markers) in BenchmarkChatTurn.
const turnTokens = 32

// BenchmarkChatTurn measures the time to the first token of a chat turn
// whose conversation so far has N tokens, side by side in one loop: cold,
// the whole conversation evaluated, as `llamagen --chat` did before the
// prefix cache; warm, through a prefixcache.Cache that holds the
// conversation, which evaluates only the turn's new tokens. Each iteration
// times one of each, in one context each of the same parameters.
//
//	go test -run NONE -bench ChatTurn -benchtime 2x ./llamacpp/llamabackend
func BenchmarkChatTurn(b *testing.B) {
	m := benchmodel.Load(b)
	rng := rand.New(rand.NewPCG(1, 2))
	vocab := m.Vocab().Size()
	for _, n := range []int{256, 1024, 4096} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			params := llamacpp.ContextParams{ContextSize: n + 4*turnTokens + 256, Sequences: 2, UnifiedKV: true, Threads: benchmodel.Threads()}
			cold := benchGenerator(b, m, params, false)
			warm := benchGenerator(b, m, params, true)
			history := make([]int32, n)
			for i := range history {
				history[i] = int32(rng.IntN(vocab))
			}
			turn := func(g *generation.Generator) time.Duration {
				prompt := slices.Clone(history)
				for range turnTokens {
					prompt = append(prompt, int32(rng.IntN(vocab)))
				}
				start := time.Now()
				_, err := g.Generate(context.Background(), []generation.Request{{Prompt: prompt, Config: greedyConfig(1)}})
				if err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			}
			// The conversation so far, in the warm cache.
			if _, err := warm.Generate(context.Background(), []generation.Request{{Prompt: history, Config: greedyConfig(1)}}); err != nil {
				b.Fatal(err)
			}
			var tCold, tWarm time.Duration
			b.ResetTimer()
			for range b.N {
				tCold += turn(cold)
				tWarm += turn(warm)
			}
			b.ReportMetric(float64(tCold.Milliseconds())/float64(b.N), "cold-ms")
			b.ReportMetric(float64(tWarm.Microseconds())/1e3/float64(b.N), "warm-ms")
			b.ReportMetric(float64(tCold)/float64(tWarm), "speedup")
		})
	}
}

// benchGenerator makes a generator over a fresh context with params, over
// a prefix cache of one slot when cached.
func benchGenerator(b *testing.B, m *llamacpp.Model, params llamacpp.ContextParams, cached bool) *generation.Generator {
	b.Helper()
	ctx, err := m.NewContext(params)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ctx.Close() })
	lb, err := llamabackend.New(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { lb.Close() })
	if !cached {
		return generation.NewGenerator(lb, nil)
	}
	pc, err := prefixcache.New(lb, prefixcache.Options{CacheSlots: 1})
	if err != nil {
		b.Fatal(err)
	}
	return generation.NewGenerator(pc, nil)
}
