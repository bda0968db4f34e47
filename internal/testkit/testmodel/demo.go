package testmodel

import (
	_ "embed"
	"strings"
)

// DemoCorpus is the English text the demo model is estimated from.
//
//go:embed demo_corpus.txt
var DemoCorpus string

// DemoSmoothing is the add-k constant of the demo model's transition
// estimates.
const DemoSmoothing = 0.001

// Demo is a first-order Markov model over the tokens of DemoCorpus, written
// exactly as the Markov oracle. Its vocabulary holds the fixed specials and
// bytes, the ChatML tokens, the printable ASCII characters and every corpus
// word as a "▁word" piece (with its prefixes), so any prompt tokenizes.
//
// Each paragraph of the corpus is a sequence <s> tokens... </s>; the
// probability of token b after token a is (count(a,b) + k) / (count(a) +
// k*|T|) over the set T of tokens that occur in the corpus plus </s>, with k =
// DemoSmoothing, and impossible (LogProbFloor) for other tokens. Tokens that
// never precede another in the corpus (the unused pieces, the bytes, </s>)
// share one extra state whose row is the smoothed unigram distribution of T.
// So greedy decoding follows the most frequent successor in the corpus and
// ends at a paragraph end only by chance (</s> follows "." once per
// paragraph).
type Demo struct {
	*Markov
	// Counts[a][b] is how often token b follows token a in the corpus.
	Counts map[int32]map[int32]int
}

// NewDemo estimates the demo model from DemoCorpus.
func NewDemo() (*Demo, error) {
	paragraphs := demoParagraphs()
	b := newVocabBuilder()
	b.addChat()
	b.addASCII()
	for _, p := range paragraphs {
		for _, chunk := range strings.Fields(p) {
			if w := leadingWord(chunk); w != "" {
				b.word(w)
			}
		}
	}
	v := b.v

	counts := map[int32]map[int32]int{}
	var sources []int32 // tokens that precede another, in order of appearance
	targets := map[int32]bool{}
	for _, p := range paragraphs {
		seq := append(append([]int32{BOS}, v.Tokenize(p, false)...), EOS)
		for i := 0; i+1 < len(seq); i++ {
			a, c := seq[i], seq[i+1]
			if counts[a] == nil {
				counts[a] = map[int32]int{}
				sources = append(sources, a)
			}
			counts[a][c]++
			targets[c] = true
		}
	}

	const other = 0
	stateOf := make([]int, v.Size())
	for i, a := range sources {
		stateOf[a] = i + 1
	}
	rows := make([][]float64, len(sources)+1)
	k := DemoSmoothing
	unigram := make([]float64, v.Size())
	for t := range targets {
		unigram[t] = k
	}
	for _, a := range sources {
		row := make([]float64, v.Size())
		for t := range targets {
			row[t] = k
		}
		for c, n := range counts[a] {
			row[c] += float64(n)
			unigram[c] += float64(n)
		}
		rows[stateOf[a]] = row
	}
	rows[other] = unigram
	m, err := newMarkov("llamaloop-demo", v, stateOf, rows)
	if err != nil {
		return nil, err
	}
	return &Demo{Markov: m, Counts: counts}, nil
}

// demoParagraphs returns the corpus paragraphs, each on one line.
func demoParagraphs() []string {
	var out []string
	for _, p := range strings.Split(strings.ReplaceAll(DemoCorpus, "\r\n", "\n"), "\n\n") {
		if p = strings.Join(strings.Fields(p), " "); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// leadingWord returns the longest prefix of chunk made of letters and digits,
// with single dots inside ("llama.cpp").
func leadingWord(chunk string) string {
	alnum := func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	end := 0
	for i := 0; i < len(chunk); i++ {
		switch {
		case alnum(chunk[i]):
			end = i + 1
		case chunk[i] == '.' && i > 0 && alnum(chunk[i-1]) && i+1 < len(chunk) && alnum(chunk[i+1]):
		default:
			return chunk[:end]
		}
	}
	return chunk[:end]
}
