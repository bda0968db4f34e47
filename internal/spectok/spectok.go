// Package spectok finds the special tokens in a text as llama.cpp's
// tokenizer does before it tokenizes the rest (llama_vocab's
// tokenizer_st_partition), in time linear in the text, where llama.cpp's own
// partition is quadratic in the number of markers; and it tells the text a
// chat template writes from the messages it renders, so that only the
// template's own markers become control tokens.
package spectok

import (
	"slices"

	"github.com/llamaloop/llamaloop/internal/testhook"
)

// Token is a special token: one that llama.cpp matches in a text before it
// tokenizes the rest.
type Token struct {
	ID   int32
	Text string
	// Control is a control or unknown token, read from its text only where
	// special tokens are parsed; the others (user-defined tokens) are
	// always read from their text, as llama.cpp does.
	Control bool
	// LStrip and RStrip drop the ASCII whitespace before and after the
	// token's text (llama_token_attr's LSTRIP and RSTRIP).
	LStrip, RStrip bool
}

// Set is a vocabulary's special tokens, ready to find in texts. It is
// safe for concurrent use.
type Set struct {
	toks  []Token // in llama.cpp's order: longest text first, then by id
	root  [256]int32
	nodes []node
	edges []edge
}

type node struct {
	tok          int32 // index in toks of the token ending here, or -1
	first, count int32 // its edges
}

type edge struct {
	b     byte
	child int32
}

// NewSet makes the set of toks; tokens with an empty text are left out
// (llama.cpp would loop forever on one).
func NewSet(toks []Token) *Set {
	s := &Set{}
	for _, t := range toks {
		if t.Text != "" {
			s.toks = append(s.toks, t)
		}
	}
	// llama.cpp sorts by length only (std::sort, not stable); ties go by id.
	slices.SortStableFunc(s.toks, func(a, b Token) int {
		if len(a.Text) != len(b.Text) {
			return len(b.Text) - len(a.Text)
		}
		return int(a.ID - b.ID)
	})
	type buildNode struct {
		tok      int32
		children map[byte]int32
	}
	build := []buildNode{{tok: -1}}
	for i, t := range s.toks {
		n := int32(0)
		for j := 0; j < len(t.Text); j++ {
			c, ok := build[n].children[t.Text[j]]
			if !ok {
				c = int32(len(build))
				build = append(build, buildNode{tok: -1})
				if build[n].children == nil {
					build[n].children = map[byte]int32{}
				}
				build[n].children[t.Text[j]] = c
			}
			n = c
		}
		if build[n].tok < 0 { // two tokens of one text: the first wins
			build[n].tok = int32(i)
		}
	}
	s.nodes = make([]node, len(build))
	for i, b := range build {
		s.nodes[i] = node{tok: b.tok, first: int32(len(s.edges)), count: int32(len(b.children))}
		keys := make([]byte, 0, len(b.children))
		for k := range b.children {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			s.edges = append(s.edges, edge{b: k, child: b.children[k]})
		}
	}
	for i := range s.root {
		s.root[i] = -1
	}
	for _, e := range s.edges[s.nodes[0].first : s.nodes[0].first+s.nodes[0].count] {
		s.root[e.b] = e.child
	}
	return s
}

func (s *Set) child(n int32, b byte) int32 {
	nd := &s.nodes[n]
	for _, e := range s.edges[nd.first : nd.first+nd.count] {
		if e.b == b {
			return e.child
		}
		if e.b > b {
			break
		}
	}
	return -1
}

// Span is a piece of a text to tokenize; in a Special span the text of a
// control token becomes that token, elsewhere it stays text.
type Span struct {
	Text    string
	Special bool
}

// Piece is a piece of a partitioned text: a special token (Token >= 0) or
// a text to tokenize as text (Token -1).
type Piece struct {
	Token int32
	Text  string
}

type occurrence struct {
	start int32
	tok   int32
}

// Partition splits the text of spans (joined) into special tokens and the
// texts between them, as llama.cpp's tokenizer_st_partition does with
// parse_special over the Special spans and without it elsewhere: user-defined
// tokens are found everywhere, control tokens only inside a Special span.
// Longer tokens are taken first over the whole text, each from left to
// right, and a token's LStrip and RStrip drop the whitespace beside it.
// Texts never follow each other: a token stands between any two.
func (s *Set) Partition(spans []Span) []Piece {
	total := 0
	for _, sp := range spans {
		total += len(sp.Text)
	}
	text := make([]byte, 0, total)
	for _, sp := range spans {
		text = append(text, sp.Text...)
	}
	str := string(text)
	if len(s.toks) == 0 || total == 0 {
		if total == 0 {
			return nil
		}
		return []Piece{{Token: -1, Text: str}}
	}

	// steps counts the work of the loops below, for testhook.Partitioned.
	steps := 0
	// Every occurrence of every token where it may be read, by start.
	var occ []occurrence
	counts := make([]int32, len(s.toks))
	pos := 0
	for _, sp := range spans {
		end := pos + len(sp.Text)
		for i := pos; i < end; i++ {
			n := s.root[text[i]]
			for j := i + 1; n >= 0; j++ {
				steps++
				if t := s.nodes[n].tok; t >= 0 && (!s.toks[t].Control || sp.Special && j <= end) {
					occ = append(occ, occurrence{start: int32(i), tok: t})
					counts[t]++
				}
				if j >= len(text) {
					break
				}
				n = s.child(n, text[j])
			}
		}
		pos = end
	}
	if len(occ) == 0 {
		return []Piece{{Token: -1, Text: str}}
	}
	// Ordered by token (longest first), then by start: a counting sort,
	// stable, as occ is by start.
	offsets := make([]int32, len(s.toks)+1)
	for i, c := range counts {
		offsets[i+1] = offsets[i] + c
	}
	sorted := make([]occurrence, len(occ))
	for _, o := range occ {
		sorted[offsets[o.tok]] = o
		offsets[o.tok]++
	}

	const (
		free    = 0
		taken   = 1
		dropped = 2
	)
	state := make([]byte, len(text))
	var found []occurrence
next:
	for _, o := range sorted {
		t := &s.toks[o.tok]
		start, end := int(o.start), int(o.start)+len(t.Text)
		for i := start; i < end; i++ {
			steps++
			if state[i] != free {
				continue next
			}
		}
		for i := start; i < end; i++ {
			state[i] = taken
		}
		if t.LStrip {
			for i := start - 1; i >= 0 && state[i] == free && isSpace(text[i]); i-- {
				steps++
				state[i] = dropped
			}
		}
		if t.RStrip {
			for i := end; i < len(text) && state[i] == free && isSpace(text[i]); i++ {
				steps++
				state[i] = dropped
			}
		}
		found = append(found, o)
	}
	slices.SortFunc(found, func(a, b occurrence) int { return int(a.start - b.start) })

	var out []Piece
	pos = 0
	for _, o := range found {
		if p := trimDropped(str, state, pos, int(o.start)); p != "" {
			out = append(out, Piece{Token: -1, Text: p})
		}
		t := &s.toks[o.tok]
		out = append(out, Piece{Token: t.ID})
		pos = int(o.start) + len(t.Text)
	}
	if p := trimDropped(str, state, pos, len(str)); p != "" {
		out = append(out, Piece{Token: -1, Text: p})
	}
	testhook.Partitioned(steps + len(sorted) + len(found))
	return out
}

// trimDropped is text[from:to] without the whitespace stripped beside its
// tokens.
func trimDropped(text string, state []byte, from, to int) string {
	for from < to && state[from] != 0 {
		from++
	}
	for to > from && state[to-1] != 0 {
		to--
	}
	return text[from:to]
}

// isSpace is C's isspace in the C locale, which llama.cpp strips with.
func isSpace(c byte) bool {
	return c == ' ' || c >= '\t' && c <= '\r'
}

// FindControl returns the control token whose text occurs first in text
// (the longest of those starting there).
func (s *Set) FindControl(text string) (Token, bool) {
	for i := 0; i < len(text); i++ {
		found := int32(-1)
		n := s.root[text[i]]
		for j := i + 1; n >= 0; j++ {
			if t := s.nodes[n].tok; t >= 0 && s.toks[t].Control {
				found = t
			}
			if j >= len(text) {
				break
			}
			n = s.child(n, text[j])
		}
		if found >= 0 {
			return s.toks[found], true
		}
	}
	return Token{}, false
}
