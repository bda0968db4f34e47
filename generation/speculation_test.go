package generation

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/grammar"
	"github.com/llamaloop/llamaloop/internal/testkit/refbackend"
	"github.com/llamaloop/llamaloop/logits"
	"github.com/llamaloop/llamaloop/mirostat"
)

// loopyModel is a deterministic model over the test pieces whose logits
// depend on the last two tokens through a hash, with the text tokens
// favoured, so that greedy decoding falls into cycles (prompt lookup then
// finds candidates); noise > 0 makes a draft that agrees with it in about
// 1-noise of the contexts.
func loopyModel(noise float64) backend.ModelFunc {
	row := make([]float32, len(testPieces))
	return func(h []int32) ([]float32, error) {
		a, b := int32(0), h[len(h)-1]
		if len(h) > 1 {
			a = h[len(h)-2]
		}
		key := uint64(a)*131 + uint64(b)*7 + 3
		r := rand.New(rand.NewPCG(key, 1))
		if noise > 0 {
			if d := rand.New(rand.NewPCG(key, 2)); d.Float64() < noise {
				r = d
			}
		}
		for i := range row {
			row[i] = float32(r.NormFloat64() * 2)
		}
		for i := range 6 {
			row[i] -= 4 // special tokens are rare: EOS and EOT still end some requests
		}
		return row, nil
	}
}

// speculationCases are the ways a request may speculate, each with the
// generator options that give it.
func speculationCases(slots int) map[string]func(*genconfig.Config) Options {
	return map[string]func(*genconfig.Config) Options{
		"lookup": func(c *genconfig.Config) Options { c.PromptLookupNumTokens = intp(3); return Options{} },
		"draft": func(c *genconfig.Config) Options {
			c.NumAssistantTokens = 3
			return Options{Draft: backend.NewMemoryBackend(len(testPieces), slots, loopyModel(0.3))}
		},
	}
}

// abGrammar admits text of a, b and c whose every "a" is followed by "b".
const abGrammar = `root ::= ("ab" | "c" | "b")+`

// Every request-level feature combines with speculation, and a
// speculating request's output (tokens, text, log-probabilities, top
// alternatives, finish reason, stop string) is exactly that of the plain
// loop, in a batch of requests of different prompts (text, chat, tokens)
// and lengths: stop strings, log-probabilities, user processors (a
// grammar: the draft proposes, the constrained target verifies), Mirostat,
// sampling with prompt lookup (the target's own draws decide), an
// observer of the scores.
func TestSpeculationCombinesExactly(t *testing.T) {
	voc, err := grammar.NewVocabulary(piecesOf(), []int32{tokEOS, tokEOT})
	require.NoError(t, err)
	g, err := grammar.Parse(abGrammar)
	require.NoError(t, err)
	features := map[string]func(r *Request, c *genconfig.Config){
		"greedy":       func(*Request, *genconfig.Config) {},
		"stop strings": func(r *Request, _ *genconfig.Config) { r.StopStrings = []string{"lo wo", "!a"} },
		"logprobs":     func(r *Request, _ *genconfig.Config) { r.Logprobs, r.TopLogprobs = true, 3 },
		"grammar": func(r *Request, _ *genconfig.Config) {
			r.Processors = []logits.Processor{grammar.NewProcessor(grammar.NewMatcher(g, voc))}
		},
		"mirostat": func(r *Request, _ *genconfig.Config) {
			r.Mirostat = &mirostat.Config{Version: mirostat.V2, Tau: 2, Eta: 0.1}
		},
		"penalties": func(_ *Request, c *genconfig.Config) { c.RepetitionPenalty, c.NoRepeatNGramSize = 1.3, 3 },
	}
	for spec, withSpec := range speculationCases(4) {
		for feature, with := range features {
			for _, sample := range []bool{false, true} {
				if sample && spec == "draft" && feature != "mirostat" {
					continue // speculative sampling draws otherwise: TestSpeculativeSamplingDistribution
				}
				t.Run(spec+"/"+feature+"/sample="+map[bool]string{false: "no", true: "yes"}[sample], func(t *testing.T) {
					var plainReqs, specReqs []Request
					var opts Options
					for i, maxNew := range []int{30, 7, 45, 1, 20} {
						plainCfg := genconfig.Default()
						plainCfg.MaxNewTokens, plainCfg.DoSample, plainCfg.TopK = intp(maxNew), sample, 10
						req := Request{Seed: uint64(i)}
						switch i % 3 {
						case 0:
							req.Text = "Hello world!"
						case 1:
							req.Messages = []backend.Message{{Role: "user", Content: "abcabc"}}
						case 2:
							req.Prompt = []int32{tokBOS, 15, 16, 15, 16}
						}
						with(&req, plainCfg)
						specCfg := plainCfg.Clone()
						opts = withSpec(specCfg)
						p, s := req, req
						p.Config, s.Config = plainCfg, specCfg
						if req.Processors != nil { // a processor keeps state: one each
							s.Processors = []logits.Processor{grammar.NewProcessor(grammar.NewMatcher(g, voc))}
						}
						plainReqs, specReqs = append(plainReqs, p), append(specReqs, s)
					}
					tok := testTokenizer{addBOS: true}
					want, err := NewGenerator(backend.NewMemoryBackend(len(testPieces), 2, loopyModel(0)), tok).Generate(context.Background(), plainReqs)
					require.NoError(t, err)
					gen, err := New(backend.NewMemoryBackend(len(testPieces), 3, loopyModel(0)), tok, opts)
					require.NoError(t, err)
					got, err := gen.Generate(context.Background(), specReqs)
					require.NoError(t, err)
					var st SpeculationStats
					for i := range want {
						st.Drafted += got[i].Speculation.Drafted
						st.Accepted += got[i].Speculation.Accepted
						w, g := want[i], got[i]
						w.Speculation, g.Speculation = SpeculationStats{}, SpeculationStats{}
						require.Equal(t, w, g, "request %d", i)
					}
					assert.Positive(t, st.Drafted)
					if feature == "stop strings" {
						assert.Equal(t, FinishStop, want[0].Finish, "a stop string ends the first request")
					}
					if feature != "grammar" {
						assert.Positive(t, st.Accepted)
					}
				})
			}
		}
	}
}

func piecesOf() [][]byte {
	out := make([][]byte, len(testPieces))
	for i, p := range testPieces {
		if !isSpecial(int32(i)) {
			out[i] = []byte(p)
		}
	}
	return out
}

// An Engine with a draft model (EngineOptions.Draft) and prompt lookup
// requests gives each request the tokens of the plain loop, requests
// submitted concurrently with different lengths.
func TestEngineSpeculates(t *testing.T) {
	for spec, withSpec := range speculationCases(3) {
		t.Run(spec, func(t *testing.T) {
			var plainReqs, specReqs []Request
			var opts Options
			for i, maxNew := range []int{25, 3, 40, 12} {
				cfg := genconfig.Default()
				cfg.MaxNewTokens = intp(maxNew)
				scfg := cfg.Clone()
				opts = withSpec(scfg)
				p := Request{Prompt: []int32{tokBOS, 6 + int32(i), 7}, Config: cfg, StopStrings: []string{"!!"}, Logprobs: true}
				s := p
				s.Config = scfg
				plainReqs, specReqs = append(plainReqs, p), append(specReqs, s)
			}
			tok := testTokenizer{addBOS: true}
			want, err := NewGenerator(backend.NewMemoryBackend(len(testPieces), 2, loopyModel(0)), tok).Generate(context.Background(), plainReqs)
			require.NoError(t, err)
			e, err := NewEngine(backend.NewMemoryBackend(len(testPieces), 3, loopyModel(0)), tok, EngineOptions{Draft: opts.Draft, PromptChunk: 2})
			require.NoError(t, err)
			defer e.Close()
			got, err := e.Generate(context.Background(), specReqs)
			require.NoError(t, err)
			drafted := 0
			for i := range want {
				drafted += got[i].Speculation.Drafted
				w, g := want[i], got[i]
				w.Speculation, g.Speculation = SpeculationStats{}, SpeculationStats{}
				require.Equal(t, w, g, "request %d", i)
			}
			assert.Positive(t, drafted)
		})
	}
}

// embeddingMemory is a MemoryBackend that claims input embeddings of width
// 4, for requests that are refused before anything runs.
type embeddingMemory struct{ *backend.MemoryBackend }

func (embeddingMemory) InputEmbeddingSize() int { return 4 }

// Speculation that cannot run is refused with its reason: a draft model
// with prompt embeddings (prompt lookup takes them), and on an
// encoder-decoder backend.
func TestSpeculationRefusals(t *testing.T) {
	cfg := genconfig.Default()
	cfg.PromptLookupNumTokens = intp(2)
	mem := func() backend.Backend { return backend.NewMemoryBackend(len(testPieces), 1, loopyModel(0)) }
	gen, err := New(embeddingMemory{mem().(*backend.MemoryBackend)}, nil, Options{Draft: mem()})
	require.NoError(t, err)
	req := Request{Prompt: []int32{6, 7}, PromptEmbeddings: make([][]float32, 2), Config: genconfig.Default()}
	_, err = gen.Generate(context.Background(), []Request{req})
	assert.ErrorContains(t, err, "speculative decoding with a draft model and PromptEmbeddings (media): the draft model cannot read the prompt's embeddings")
	req.Config = cfg
	_, err = gen.Generate(context.Background(), []Request{req})
	assert.NoError(t, err, "prompt lookup")
	m := t5Reference(t)
	_, err = NewGenerator(refbackend.NewT5(m, 1), nil).Generate(context.Background(), []Request{{Prompt: []int32{300, 2}, Config: cfg}})
	assert.ErrorContains(t, err, "encoder-decoder")
}
