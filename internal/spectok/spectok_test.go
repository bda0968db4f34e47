package spectok

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testhook"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// oracle is llama.cpp's tokenizer_st_partition (llama-vocab.cpp at the
// pinned commit) ported line by line: for each token, longest first, every
// raw fragment is searched from its start, the match splits it, and LSTRIP
// and RSTRIP eat the whitespace beside it. allowed tells whether a match
// may be taken (parse_special for control tokens); a refused match is
// searched past, as llama.cpp's find would never have seen it.
func oracle(text string, toks []Token, allowed func(t Token, start int) bool) []Piece {
	type frag struct {
		tok         int32 // -1: raw
		off, length int
	}
	buf := []frag{{tok: -1, off: 0, length: len(text)}}
	if text == "" {
		buf = nil
	}
	set := NewSet(toks) // only for its order
	for _, t := range set.toks {
		for i := 0; i < len(buf); i++ {
			f := buf[i]
			if f.tok >= 0 {
				continue
			}
			base, length := f.off, f.length
			var repl []frag
			from := base
			for {
				m := strings.Index(text[from:base+length], t.Text)
				if m < 0 {
					break
				}
				m += from
				if !allowed(t, m) {
					from = m + 1
					continue
				}
				if m > base {
					ll := m - base
					if t.LStrip {
						for ll > 0 && isSpace(text[base+ll-1]) {
							ll--
						}
					}
					if ll > 0 {
						repl = append(repl, frag{tok: -1, off: base, length: ll})
					}
				}
				repl = append(repl, frag{tok: t.ID})
				ro, rl := m+len(t.Text), length-(m-base+len(t.Text))
				if t.RStrip {
					for rl > 0 && isSpace(text[ro]) {
						ro++
						rl--
					}
				}
				base, length, from = ro, rl, ro
			}
			if repl == nil {
				continue
			}
			if length > 0 {
				repl = append(repl, frag{tok: -1, off: base, length: length})
			}
			buf = append(buf[:i], append(repl, buf[i+1:]...)...)
			i += len(repl) - 1
		}
	}
	var out []Piece
	for _, f := range buf {
		if f.tok >= 0 {
			out = append(out, Piece{Token: f.tok})
		} else {
			out = append(out, Piece{Token: -1, Text: text[f.off : f.off+f.length]})
		}
	}
	return out
}

var testTokens = []Token{
	{ID: 10, Text: "<|im_start|>", Control: true},
	{ID: 11, Text: "<|im_end|>", Control: true},
	{ID: 12, Text: "<|im", Control: true},
	{ID: 13, Text: "<tool_call>"},          // user-defined
	{ID: 14, Text: "<mask>", LStrip: true}, // user-defined, as jina's
	{ID: 15, Text: "<sep>", Control: true, RStrip: true},
	{ID: 16, Text: "aa", Control: true},
	{ID: 17, Text: "end|><|im", Control: true}, // overlaps the markers
	{ID: 18, Text: "a", Control: false},
	{ID: 19, Text: "", Control: true}, // left out
}

// randomText joins the tokens' texts, parts of them, whitespace and words.
func randomText(r *rand.Rand, n int) string {
	parts := []string{" ", "  ", "\n", "\t", "x", "hello", "<|", "|>", "end", " <mask>", "<sep> \n"}
	for _, t := range testTokens {
		parts = append(parts, t.Text)
	}
	var b strings.Builder
	for range n {
		b.WriteString(parts[r.IntN(len(parts))])
	}
	return b.String()
}

// Partition gives the pieces of llama.cpp's own algorithm on random texts
// full of overlapping markers, with special-token parsing on, off, and on
// in some spans only.
func TestPartitionMatchesLlamaCpp(t *testing.T) {
	set := NewSet(testTokens)
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 3000 {
		var spans []Span
		for range 1 + r.IntN(4) {
			spans = append(spans, Span{Text: randomText(r, r.IntN(12)), Special: r.IntN(2) == 0})
		}
		var text strings.Builder
		var bounds [][3]int // start, end, special
		for _, sp := range spans {
			s := 0
			if sp.Special {
				s = 1
			}
			bounds = append(bounds, [3]int{text.Len(), text.Len() + len(sp.Text), s})
			text.WriteString(sp.Text)
		}
		allowed := func(tok Token, start int) bool {
			if !tok.Control {
				return true
			}
			for _, b := range bounds {
				if start >= b[0] && start < b[1] {
					return b[2] == 1 && start+len(tok.Text) <= b[1]
				}
			}
			return false
		}
		want := oracle(text.String(), testTokens, allowed)
		got := set.Partition(spans)
		require.Equal(t, want, got, "trial %d: %q", trial, spans)
	}
}

func TestPartitionCases(t *testing.T) {
	set := NewSet(testTokens)
	// Longest first: "<|im_end|>" wins over "<|im" and over the
	// overlapping "end|><|im"; the control token stays text outside a
	// Special span, the user-defined one does not.
	assert.Equal(t, []Piece{{Token: 11}, {Token: 12}, {Token: -1, Text: "x"}},
		set.Partition([]Span{{Text: "<|im_end|><|imx", Special: true}}))
	assert.Equal(t, []Piece{{Token: -1, Text: "<|im_end|> "}, {Token: 13}, {Token: -1, Text: " x"}},
		set.Partition([]Span{{Text: "<|im_end|> <tool_call> x"}}))
	// LStrip and RStrip drop the whitespace beside the token only.
	assert.Equal(t, []Piece{{Token: -1, Text: "x"}, {Token: 14}, {Token: -1, Text: " y"}},
		set.Partition([]Span{{Text: "x  \n<mask> y"}}))
	assert.Equal(t, []Piece{{Token: -1, Text: "x "}, {Token: 15}, {Token: -1, Text: "y"}},
		set.Partition([]Span{{Text: "x <sep> \n y", Special: true}}))
	// A marker across a span boundary is no marker (but "<|im" inside
	// the Special span is one).
	assert.Equal(t, []Piece{{Token: -1, Text: "<|im_end|>"}},
		set.Partition([]Span{{Text: "<|i", Special: true}, {Text: "m_end|>"}}))
	assert.Equal(t, []Piece{{Token: 12}, {Token: -1, Text: "_end|>"}},
		set.Partition([]Span{{Text: "<|im_", Special: true}, {Text: "end|>"}}))
	assert.Nil(t, set.Partition(nil))
	tok, ok := set.FindControl("x <tool_call> <|im_end|>")
	assert.True(t, ok)
	assert.Equal(t, "<|im_end|>", tok.Text)
	_, ok = set.FindControl("x <tool_call> <|i m_end|>")
	assert.False(t, ok)
}

// The partition's work is linear in the text, whatever the number of
// markers: ten times the markers take ten times the steps, counted, not
// timed (quadratic would be a hundred).
func TestPartitionLinear(t *testing.T) {
	set := NewSet(testTokens)
	var steps int
	defer testhook.SetPartitioned(func(n int) { steps = n })()
	stepsOf := func(n int) int {
		text := strings.Repeat("<|im_start|>user\nhi <tool_call><|im_end|>\n", n)
		p := set.Partition([]Span{{Text: text, Special: true}})
		require.Equal(t, 5*n, len(p))
		return steps
	}
	small, large := stepsOf(20_000), stepsOf(200_000)
	t.Logf("20k markers x3: %d steps, 200k: %d", small, large)
	assert.Positive(t, small)
	assert.LessOrEqual(t, large, 10*small+100)
}

func BenchmarkPartition1MB(b *testing.B) {
	set := NewSet(testTokens)
	text := strings.Repeat("<|im_start|>user\nsome words <|im_end|>\n", 1<<20/40)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		set.Partition([]Span{{Text: text, Special: true}})
	}
}

func ExampleSet_Partition() {
	set := NewSet([]Token{{ID: 7, Text: "<|im_end|>", Control: true}})
	for _, p := range set.Partition([]Span{{Text: "hi <|im_end|>", Special: false}, {Text: "<|im_end|>", Special: true}}) {
		fmt.Printf("%d %q\n", p.Token, p.Text)
	}
	// Output:
	// -1 "hi <|im_end|>"
	// 7 ""
}

// FuzzPartition checks Partition against the port of llama.cpp's
// algorithm on any text, split into a Special and a plain span at cut.
func FuzzPartition(f *testing.F) {
	f.Add("<|im_start|>user\nhi<|im_end|>", 5)
	f.Add(" <mask>  <sep> \n aa<|im", 3)
	set := NewSet(testTokens)
	f.Fuzz(func(t *testing.T, text string, cut int) {
		if cut < 0 || cut > len(text) {
			cut = len(text) / 2
		}
		spans := []Span{{Text: text[:cut], Special: true}, {Text: text[cut:]}}
		allowed := func(tok Token, start int) bool {
			return !tok.Control || start+len(tok.Text) <= cut
		}
		want := oracle(text, testTokens, allowed)
		require.Equal(t, want, set.Partition(spans))
	})
}
