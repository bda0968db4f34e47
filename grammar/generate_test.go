package grammar

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/beam"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/logits"
	"github.com/llamaloop/llamaloop/mirostat"
)

// testPieces is a vocabulary shaped like a real one: every byte (so that any text can be
// spelled, and multi-byte characters split), pieces that span several JSON elements, words with
// a leading space, and an end-of-generation token last.
func testPieces() [][]byte {
	var out [][]byte
	for b := range 256 {
		out = append(out, []byte{byte(b)})
	}
	for _, s := range []string{`{"`, `":`, `", "`, `"}`, `"]`, `},`, `}]`, `[{`, `["`, `",`, `":"`, `": "`, ` "`, `"`, "true", "false", "null",
		" true", "nul", "10", "0.", "-1", "e+", "42", "name", "age", "tags", "id", " the", " a", "hello", "é", "😀", "\xf0\x9f", "\x98\x80",
		`\n`, `\"`, `\u00`, "  ", "\n ", ", ", ": ", "]}", "}}", "]]", "2024-", "-01", "T12:", ":00Z", "abc", "12", "x", "yes", "no", "<|eot|>"} {
		out = append(out, []byte(s))
	}
	out = append(out, nil) // end of generation
	return out
}

type pieceTokenizer struct{ pieces [][]byte }

func (p pieceTokenizer) Tokenize(string, bool, bool) ([]int32, error) { return nil, nil }
func (p pieceTokenizer) AppendPiece(dst []byte, t int32, _ bool) ([]byte, error) {
	return append(dst, p.pieces[t]...), nil
}
func (p pieceTokenizer) IsEOG(t int32) bool { return int(t) == len(p.pieces)-1 }
func (p pieceTokenizer) EOGTokens() []int32 { return []int32{int32(len(p.pieces) - 1)} }
func (p pieceTokenizer) AddsBOS() bool      { return false }

// randomModel returns logits drawn from a generator seeded with a hash of the whole history.
func randomModel(vocab int, seed uint64) backend.ModelFunc {
	buf := make([]float32, vocab)
	return func(history []int32) ([]float32, error) {
		h := fnv.New64a()
		for _, t := range history {
			h.Write([]byte{byte(t), byte(t >> 8)})
		}
		src := rand.NewPCG(h.Sum64(), seed)
		for i := range buf {
			buf[i] = float32(src.Uint64()>>40)/float32(1<<24)*8 - 4
		}
		return buf, nil
	}
}

// markovModel is testmodel's random Markov chain: a few favourite successors per token.
func markovModel(t testing.TB, vocab int, seed uint64) backend.ModelFunc {
	rows, err := testmodel.RandomTransitions(vocab, seed)
	require.NoError(t, err)
	logs := make([][]float32, vocab)
	for a, row := range rows {
		logs[a] = make([]float32, vocab)
		for b, p := range row {
			logs[a][b] = float32(math.Log(p))
		}
	}
	return func(history []int32) ([]float32, error) { return logs[history[len(history)-1]], nil }
}

type genCase struct {
	name    string
	g       *Grammar
	valid   func(s string) error
	bounded bool // every sentence has a bounded length: every generation must end with EOS
}

func mustSchema(t testing.TB, schema string) *Grammar {
	g, err := FromJSONSchema([]byte(schema))
	require.NoError(t, err, schema)
	return g
}

func jsonValid(s string) error {
	if !json.Valid([]byte(s)) {
		return fmt.Errorf("not JSON")
	}
	return nil
}

// personSchema is bounded: short strings, enums, bounded arrays.
const personSchema = `{"type": "object", "properties": {
	"name": {"type": "string", "maxLength": 6},
	"age": {"type": "integer"},
	"tags": {"type": "array", "items": {"enum": ["a", "b", 3, null]}, "minItems": 1, "maxItems": 3},
	"ok": {"type": "boolean"},
	"when": {"type": "string", "format": "date"}
}, "required": ["name", "age", "tags"], "additionalProperties": false}`

// checkPerson validates a document against personSchema, by hand.
func checkPerson(s string) error {
	var v map[string]any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return err
	}
	for _, k := range []string{"name", "age", "tags"} {
		if _, ok := v[k]; !ok {
			return fmt.Errorf("missing %s", k)
		}
	}
	for k, x := range v {
		switch k {
		case "name":
			s, ok := x.(string)
			if !ok || utf8.RuneCountInString(s) > 6 {
				return fmt.Errorf("bad name %v", x)
			}
		case "age":
			n, ok := x.(json.Number)
			if _, err := n.Int64(); !ok || err != nil {
				return fmt.Errorf("bad age %v", x)
			}
		case "tags":
			a, ok := x.([]any)
			if !ok || len(a) < 1 || len(a) > 3 {
				return fmt.Errorf("bad tags %v", x)
			}
			for _, e := range a {
				if e != "a" && e != "b" && e != json.Number("3") && e != nil {
					return fmt.Errorf("bad tag %v", e)
				}
			}
		case "ok":
			if _, ok := x.(bool); !ok {
				return fmt.Errorf("bad ok %v", x)
			}
		case "when":
			s, _ := x.(string)
			if !regexp.MustCompile(`^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$`).MatchString(s) {
				return fmt.Errorf("bad date %v", x)
			}
		default:
			return fmt.Errorf("extra key %q", k)
		}
	}
	return nil
}

func genCases(t testing.TB) []genCase {
	return []genCase{
		{"person-schema", mustSchema(t, personSchema), checkPerson, true},
		{"pattern-schema", mustSchema(t, `{"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{2}-[0-9]{3}$"},"n":{"enum":[1,2]}},"required":["code"]}`),
			func(s string) error {
				var v struct {
					Code string `json:"code"`
				}
				if err := json.Unmarshal([]byte(s), &v); err != nil {
					return err
				}
				if !regexp.MustCompile(`^[A-Z]{2}-[0-9]{3}$`).MatchString(v.Code) {
					return fmt.Errorf("code %q", v.Code)
				}
				return nil
			}, true},
		{"range-tuple-schema", mustSchema(t, `{"type":"object","properties":{"pos":{"type":"array","prefixItems":[{"type":"integer","minimum":-50,"maximum":50},{"type":"integer","exclusiveMinimum":0,"maximum":1000}],"items":false,"minItems":2}},"required":["pos"]}`),
			func(s string) error {
				var v struct {
					Pos []int64 `json:"pos"`
				}
				if err := json.Unmarshal([]byte(s), &v); err != nil {
					return err
				}
				if len(v.Pos) != 2 || v.Pos[0] < -50 || v.Pos[0] > 50 || v.Pos[1] <= 0 || v.Pos[1] > 1000 {
					return fmt.Errorf("pos %v", v.Pos)
				}
				return nil
			}, true},
		{"gbnf-list", mustParse(t, `root ::= item ("," " "? item){0,4} "."
item ::= [a-z]{1,5} | "\"" [^"\n]{0,3} "\"" | [0-9]+ ("." [0-9]{1,2})?`), reCheck(`^(?:[a-z]{1,5}|"[^"\n]{0,3}"|[0-9]+(?:\.[0-9]{1,2})?)(?:, ?(?:[a-z]{1,5}|"[^"\n]{0,3}"|[0-9]+(?:\.[0-9]{1,2})?)){0,4}\.$`), false},
		{"gbnf-emoji", mustParse(t, `root ::= ("😀" | [é-ê] | "yes" | "no"){1,6}`), reCheck(`^(?:😀|[é-ê]|yes|no){1,6}$`), true},
		{"any-json", JSON(), jsonValid, false},
	}
}

func mustParse(t testing.TB, src string) *Grammar {
	g, err := Parse(src)
	require.NoError(t, err)
	return g
}

func reCheck(re string) func(string) error {
	r := regexp.MustCompile(re)
	return func(s string) error {
		if !utf8.ValidString(s) || !r.MatchString(s) {
			return fmt.Errorf("does not match %s", re)
		}
		return nil
	}
}

// TestGenerationsAreValid runs seeded generations of self-made models whose free output is
// nonsense, under each grammar, with sampling, greedy decoding and Mirostat: every output that
// ends with end of generation is a sentence (validated by an independent checker), outputs of a
// bounded grammar always end so, and outputs cut by max_new_tokens are prefixes of a sentence.
func TestGenerationsAreValid(t *testing.T) {
	pieces := testPieces()
	V := len(pieces)
	tok := pieceTokenizer{pieces}
	voc, err := VocabularyFrom(tok, V)
	require.NoError(t, err)
	seeds := 400
	if testing.Short() {
		seeds = 20
	}
	total, ended := 0, 0
	for _, c := range genCases(t) {
		m := NewMatcher(c.g, voc)
		proc := NewProcessor(m)
		for mi, model := range []backend.ModelFunc{randomModel(V, 1), markovModel(t, V, 2)} {
			for seed := range seeds {
				cfg := genconfig.Default()
				maxNew := 400
				cfg.MaxNewTokens = &maxNew
				var miro *mirostat.Config
				switch seed % 3 {
				case 0:
					cfg.DoSample, cfg.Temperature, cfg.TopK = true, 1.5, 0
				case 1:
					cfg.DoSample, cfg.TopK, cfg.TopP = true, 20, 0.9
				case 2:
					miro = &mirostat.Config{Version: mirostat.V2, Tau: 5, Eta: 0.1}
				}
				if seed == 0 {
					cfg.DoSample = false // greedy once per model
				}
				gen := generation.NewGenerator(backend.NewMemoryBackend(V, 1, model), tok)
				res, err := gen.Generate(context.Background(), []generation.Request{{
					Prompt: []int32{int32(seed % 256)}, Config: cfg, Seed: uint64(seed), Mirostat: miro,
					Processors: []logits.Processor{proc},
				}})
				require.NoError(t, err)
				r := res[0]
				text := r.Text
				total++
				st := m.AcceptBytes(m.Start(), []byte(r.Text))
				switch r.Finish {
				case generation.FinishEOS:
					ended++
					if seed < 2 {
						t.Logf("%s model %d seed %d: %q", c.name, mi, seed, text)
					}
					assert.NoError(t, c.valid(text), "%s model %d seed %d: %q", c.name, mi, seed, text)
				case generation.FinishLength:
					assert.False(t, c.bounded, "%s model %d seed %d: bounded grammar cut: %q", c.name, mi, seed, text)
					assert.False(t, m.Dead(st), "%s: %q left the grammar", c.name, text)
				default:
					t.Fatalf("%s model %d seed %d: finish %v (%v): %q", c.name, mi, seed, r.Finish, r.Err, text)
				}
			}
		}
	}
	t.Logf("%d generations, %d ended with end of generation", total, ended)
}

// TestBeamSearchIsValid runs beam search (transformers' rule, 4 beams, 2 returned) under the
// grammars: the beams' grammar states follow their parents through History.CopyFrom, so every
// finished hypothesis is a sentence.
func TestBeamSearchIsValid(t *testing.T) {
	pieces := testPieces()
	V := len(pieces)
	voc, err := VocabularyFrom(pieceTokenizer{pieces}, V)
	require.NoError(t, err)
	finished := 0
	for _, c := range genCases(t) {
		proc := NewProcessor(NewMatcher(c.g, voc))
		for seed := range 6 {
			cfg := genconfig.Default()
			maxNew := 200
			cfg.MaxNewTokens = &maxNew
			cfg.NumBeams, cfg.NumReturnSequences = 4, 2
			cfg.EOSTokenID = []int32{int32(V - 1)}
			cfg.DoSample = seed%2 == 1
			model := randomModel(V, uint64(seed))
			if seed >= 3 {
				model = markovModel(t, V, uint64(seed))
			}
			res, err := beam.Search(context.Background(), backend.NewMemoryBackend(V, 4, model), [][]int32{{int32(seed)}},
				beam.Options{Config: cfg, User: []logits.Processor{proc}, Seed: uint64(seed)})
			require.NoError(t, err)
			for _, h := range res.Hypotheses[0] {
				var text []byte
				for _, tk := range h.Tokens {
					text = append(text, pieces[tk]...)
				}
				if h.Finished {
					finished++
					assert.NoError(t, c.valid(string(text)), "%s seed %d: %q", c.name, seed, text)
				} else {
					assert.False(t, c.bounded, "%s seed %d: %q", c.name, seed, text)
				}
			}
		}
	}
	assert.Greater(t, finished, 40)
}

// TestStepDoesNotAllocate checks that, once a state's mask is known, masking a row and accepting
// a token allocate nothing, through the processor as the pipeline runs it.
func TestStepDoesNotAllocate(t *testing.T) {
	pieces := testPieces()
	V := len(pieces)
	voc, err := VocabularyFrom(pieceTokenizer{pieces}, V)
	require.NoError(t, err)
	m := NewMatcher(JSON(), voc)
	pipe, err := logits.Chain(V, NewProcessor(m))
	require.NoError(t, err)
	doc := []int32{'[', '1', ',', ' ', '"', 'a', '"', ']'} // byte tokens
	scores := make([]float32, V)
	run := func() {
		h := pipe.NewHistory([]int32{0})
		for _, tk := range doc {
			clear(scores)
			pipe.Process(h, scores)
			require.False(t, math.IsInf(float64(scores[tk]), -1), "token %q masked", tk)
			h.Accept(tk)
		}
	}
	run() // computes the masks
	steps := testing.AllocsPerRun(50, func() {
		st := m.Start()
		for _, tk := range doc {
			m.Apply(st, scores)
			st = m.Accept(st, tk)
		}
	})
	assert.Zero(t, steps)
}

// TestMatcherConcurrentUse shares one matcher between goroutines that walk different documents
// (as beam search's parallel rows and several generators do); run with -race.
func TestMatcherConcurrentUse(t *testing.T) {
	m := NewMatcher(JSON(), byteVocab(t))
	docs := []string{`{"a": [1, 2.5e3, "x\u00e9"]}`, `[true, false, null, {"k": {}}]`, `"deep\n"`, `-12.5`}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			scores := make([]float32, 257)
			st := m.Start()
			for _, c := range []byte(docs[i%len(docs)]) {
				clear(scores)
				m.Apply(st, scores)
				assert.False(t, math.IsInf(float64(scores[c]), -1))
				st = m.Accept(st, int32(c))
			}
			assert.True(t, m.Complete(st))
		}()
	}
	wg.Wait()
}

// TestFootprintGrowsWithNesting checks that the footprint counts the automaton: any JSON nested
// ever deeper reaches a new state per level, and the footprint follows.
func TestFootprintGrowsWithNesting(t *testing.T) {
	m := NewMatcher(JSON(), byteVocab(t))
	s := m.Start()
	start := m.Footprint()
	for range 200 {
		s = m.AcceptBytes(s, []byte("["))
	}
	require.False(t, m.Dead(s))
	grown := m.Footprint()
	assert.Greater(t, grown-start, 200*1024, "200 new states of 256 transitions each")
	s = m.AcceptBytes(m.Start(), []byte(strings.Repeat("[", 200)))
	assert.Equal(t, grown, m.Footprint(), "states met before cost nothing")
	m.Apply(s, make([]float32, m.Vocabulary().Size()))
	assert.Greater(t, m.Footprint(), grown, "a computed mask is counted")
}
