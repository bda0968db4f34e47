package nativesampler_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llamaloop/llamaloop/grammar"
	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/llamaloop/llamaloop/internal/testkit/benchrows"
	"github.com/llamaloop/llamaloop/internal/testkit/nativesampler"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
)

// realisticVocab returns an SPM vocabulary of exactly n tokens shaped like a real model's: the
// byte tokens, English-like words with and without a leading space and capitals, numbers of up
// to three digits, punctuation runs and code/JSON fragments ({" ": ", \n ...), and non-ASCII
// words (accented Latin, Cyrillic, CJK, emoji), all distinct.
func realisticVocab(n int) (*testmodel.Vocab, error) {
	v := &testmodel.Vocab{AddBOS: true}
	add := func(piece string, typ testmodel.TokenType) {
		v.Tokens = append(v.Tokens, piece)
		v.Scores = append(v.Scores, -float32(len(v.Tokens)))
		v.Types = append(v.Types, typ)
	}
	add("<unk>", testmodel.TokenUnknown)
	add("<s>", testmodel.TokenControl)
	add("</s>", testmodel.TokenControl)
	for b := range 256 {
		add(fmt.Sprintf("<0x%02X>", b), testmodel.TokenByte)
	}
	seen := map[string]bool{}
	rng := rand.New(rand.NewPCG(42, uint64(n)))
	cons := []string{"b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "st", "th", "ch", "tr", "pl"}
	vows := []string{"a", "e", "i", "o", "u", "ou", "ea", "io"}
	punct := []string{"{", "}", "[", "]", "\"", ":", ",", ".", ";", "(", ")", "-", "_", "/", "\\", "'", "!", "?", "=", "+", "*", "#", "<", ">", "\n", "\t", "▁"}
	other := []string{"é", "è", "à", "ü", "ö", "ñ", "ç", "ж", "д", "и", "к", "я", "中", "文", "日", "本", "語", "한", "국", "😀", "🎉", "→", "…", "—", "“", "”"}
	word := func() string {
		var b strings.Builder
		for range 1 + rng.IntN(4) {
			b.WriteString(cons[rng.IntN(len(cons))] + vows[rng.IntN(len(vows))])
		}
		if rng.IntN(3) == 0 {
			b.WriteString(cons[rng.IntN(len(cons))])
		}
		return b.String()
	}
	for len(v.Tokens) < n {
		var s string
		switch k := rng.IntN(100); {
		case k < 55:
			s = word()
			if rng.IntN(6) == 0 {
				s = strings.ToUpper(s[:1]) + s[1:]
			}
			if rng.IntN(2) == 0 {
				s = "▁" + s
			}
		case k < 62:
			s = fmt.Sprint(rng.IntN(1000))
			if rng.IntN(4) == 0 {
				s = "▁" + s
			}
		case k < 80:
			var b strings.Builder
			for range 1 + rng.IntN(4) {
				b.WriteString(punct[rng.IntN(len(punct))])
			}
			if rng.IntN(3) == 0 {
				b.WriteString(word())
			}
			s = b.String()
		default:
			var b strings.Builder
			if rng.IntN(2) == 0 {
				b.WriteString("▁")
			}
			for range 1 + rng.IntN(3) {
				b.WriteString(other[rng.IntN(len(other))])
			}
			s = b.String()
		}
		if !seen[s] {
			seen[s] = true
			add(s, testmodel.TokenNormal)
		}
	}
	return v, nil
}

// grammarModel writes (once per run) a vocabulary-only-sized model of n realistic tokens.
func grammarModel(b *testing.B, n int) string {
	dir := filepath.Join(os.TempDir(), "llamaloop-grammar-bench")
	path := filepath.Join(dir, fmt.Sprintf("vocab-%d.gguf", n))
	if _, err := os.Stat(path); err == nil {
		return path
	}
	v, err := realisticVocab(n)
	if err != nil {
		b.Fatal(err)
	}
	spec := testmodel.Spec{Name: "grammar-bench", NEmbd: 16, NLayer: 1, NHead: 1, NHeadKV: 1, NFF: 16, NCtxTrain: 512,
		RopeFreqBase: 10000, RMSEps: 1e-5, WeightType: gguf.TensorF16, Tied: true, Seed: 1, Vocab: v}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := testmodel.WriteRandom(path+".tmp", spec); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		b.Fatal(err)
	}
	return path
}

const benchSchema = `{"type": "object", "properties": {
	"name": {"type": "string"},
	"age": {"type": "integer"},
	"email": {"type": "string"},
	"tags": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
	"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}}, "required": ["city"]},
	"active": {"type": "boolean"}
}, "required": ["name", "age", "address"]}`

// benchGrammars are the grammars timed: a JSON schema, any JSON, and two GBNF grammars of
// llama.cpp's examples (arithmetic.gbnf and list.gbnf).
func benchGrammars(b *testing.B) map[string]string {
	schema, err := grammar.SchemaToGBNF([]byte(benchSchema))
	if err != nil {
		b.Fatal(err)
	}
	return map[string]string{
		"json-schema": schema,
		"json":        grammar.JSONGrammarText,
		"arithmetic": `root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*`,
		"list": `root ::= item+
item ::= "- " [^\r\n\x0b\x0c\x85\u2028\u2029]+ "\n"`,
	}
}

// documents draws token sequences under the grammar: at each step the highest of a random row
// among the allowed tokens, until end of generation or 200 tokens. Both sides replay them.
func documents(m *grammar.Matcher, V int) [][]int32 {
	rng := rand.New(rand.NewPCG(7, uint64(V)))
	row := make([]float32, V)
	var docs [][]int32
	for range 3 {
		var doc []int32
		s := m.Start()
		for len(doc) < 200 {
			for i := range row {
				row[i] = float32(rng.NormFloat64())
			}
			m.Apply(s, row)
			best := -1
			for i, x := range row {
				if best < 0 || x > row[best] {
					best = i
				}
			}
			if m.Vocabulary().IsEOG(int32(best)) {
				break
			}
			doc = append(doc, int32(best))
			s = m.Accept(s, int32(best))
		}
		docs = append(docs, doc)
	}
	return docs
}

// BenchmarkSideBySideGrammar times the mask of one step (with the acceptance of the chosen
// token) under llamaloop's grammar.Matcher and llama.cpp's grammar sampler, on the same rows and
// token sequences in the same run. llamaloop's cost is reported warm (every state's mask known:
// the steady state of a long-lived matcher) and cold (the first pass of a fresh matcher over the
// same sequences, which computes each state's mask once); prep-ms is the one-time preparation
// of the vocabulary (reading the pieces, the prefix trie).
func BenchmarkSideBySideGrammar(b *testing.B) {
	for _, V := range benchrows.Vocabularies {
		path := grammarModel(b, V)
		model, err := llamacpp.LoadModel(path, llamacpp.ModelParams{VocabOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		voc, err := grammar.VocabularyFrom(model.Vocab(), model.Vocab().Size())
		if err != nil {
			b.Fatal(err)
		}
		prep := time.Since(start)
		grams := benchGrammars(b)
		for _, name := range []string{"json-schema", "json", "arithmetic", "list"} {
			src := grams[name]
			b.Run(fmt.Sprintf("%s/V=%d", name, V), func(b *testing.B) {
				g, err := grammar.Parse(src)
				if err != nil {
					b.Fatal(err)
				}
				theirs, err := nativesampler.NewGrammar(path, src)
				if err != nil {
					b.Fatal(err)
				}
				defer theirs.Close()
				docs := documents(grammar.NewMatcher(g, voc), V)
				rows := benchrows.Rows(4, V)
				work := make([]float32, V)

				// Cold: a fresh matcher's first pass over the documents.
				cold := grammar.NewMatcher(g, voc)
				steps := 0
				t0 := time.Now()
				coldTime := time.Duration(0)
				for _, doc := range docs {
					s := cold.Start()
					for i, tok := range doc {
						copy(work, rows[i%len(rows)])
						t0 = time.Now()
						cold.Apply(s, work)
						s = cold.Accept(s, tok)
						coldTime += time.Since(t0)
						steps++
					}
				}
				coldPer := coldTime / time.Duration(steps)

				m := grammar.NewMatcher(g, voc)
				for _, doc := range docs { // warm up: every mask once
					s := m.Start()
					for _, tok := range doc {
						m.Apply(s, work)
						s = m.Accept(s, tok)
					}
				}
				var tOurs, tTheirs time.Duration
				d, i := 0, 0
				s := m.Start()
				b.ReportAllocs()
				for b.Loop() {
					if i == len(docs[d]) {
						d, i = (d+1)%len(docs), 0
						s = m.Start()
						theirs.Reset()
					}
					tok, row := docs[d][i], rows[i%len(rows)]
					i++
					copy(work, row)
					t1 := time.Now()
					m.Apply(s, work)
					s = m.Accept(s, tok)
					t2 := time.Now()
					if err := theirs.Mask(row); err != nil {
						b.Fatal(err)
					}
					theirs.Accept(tok)
					tTheirs += time.Since(t2)
					tOurs += t2.Sub(t1)
				}
				// Alone: the same steps without llama.cpp's work in between, which evicts the
				// masks and the row from the caches.
				alone := time.Duration(0)
				s = m.Start()
				for _, doc := range docs {
					s = m.Start()
					for i, tok := range doc {
						copy(work, rows[i%len(rows)])
						t1 := time.Now()
						m.Apply(s, work)
						s = m.Accept(s, tok)
						alone += time.Since(t1)
					}
				}
				n := float64(b.N)
				b.ReportMetric(float64(alone.Nanoseconds())/1e3/float64(steps), "alone-µs/token")
				b.ReportMetric(float64(tOurs.Nanoseconds())/1e3/n, "llamaloop-µs/token")
				b.ReportMetric(float64(coldPer.Nanoseconds())/1e3, "cold-µs/token")
				b.ReportMetric(float64(tTheirs.Nanoseconds())/1e3/n, "llama.cpp-µs/token")
				b.ReportMetric(float64(tOurs)/float64(tTheirs), "ratio")
				b.ReportMetric(float64(prep.Microseconds())/1e3, "prep-ms")
			})
		}
		model.Close()
	}
}
