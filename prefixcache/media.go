package prefixcache

import (
	"fmt"
	"math"

	"github.com/llamaloop/llamaloop/backend"
)

// Media (the package documentation's Media): each position of a history has
// a key, 0 for a token and a hash of the values for an input embedding,
// compared with its token.

// InputEmbeddingSize implements backend.EmbeddingInput: the underlying
// backend's, or 0 when it takes no input embeddings (a feed with some is
// then refused).
func (c *Cache) InputEmbeddingSize() int {
	if in, ok := c.b.(backend.EmbeddingInput); ok {
		return in.InputEmbeddingSize()
	}
	return 0
}

// MRoPE implements backend.PositionInput: whether the underlying backend
// takes M-RoPE positions (Feed.Pos). A reused prefix skips the positions of
// its tokens as it skips the tokens; it never ends inside an image, whose
// embeddings share a position.
func (c *Cache) MRoPE() bool {
	in, ok := c.b.(backend.PositionInput)
	return ok && in.MRoPE()
}

// MaxNonCausal implements backend.NonCausalInput: the underlying
// backend's bound, or 0 when it evaluates no non-causal runs (a feed with
// some is then refused).
func (c *Cache) MaxNonCausal() int {
	if in, ok := c.b.(backend.NonCausalInput); ok {
		return in.MaxNonCausal()
	}
	return 0
}

// skipRuns is runs, the non-causal runs of a feed, after its first n
// positions come from a reused prefix: the runs inside it dropped, the
// others moved n earlier. A reused prefix ends between runs of
// embeddings (match), never inside one.
func skipRuns(runs []backend.Span, n int) ([]backend.Span, error) {
	if len(runs) == 0 || n == 0 {
		return runs, nil
	}
	var out []backend.Span
	for _, r := range runs {
		switch {
		case r.End <= n:
		case r.Start < n:
			return nil, fmt.Errorf("%w: a reused prefix of %d positions ends inside the non-causal run [%d, %d)", backend.ErrBadEmbedding, n, r.Start, r.End)
		default:
			out = append(out, backend.Span{Start: r.Start - n, End: r.End - n})
		}
	}
	return out, nil
}

// match is the length, at most limit, of the common prefix of history a
// with media keys ak and history b with media keys bk (each empty or one
// key per token): tokens and keys agree, and the prefix does not end inside
// a run of embeddings of b, nor where a's run goes on past it (then it
// ends before the run).
func match(a []int32, ak []uint64, b []int32, bk []uint64, limit int) int {
	n := sharedPrefix(a, b, limit)
	if len(ak) == 0 && len(bk) == 0 {
		return n
	}
	for i := range n {
		if keyAt(ak, i) != keyAt(bk, i) {
			n = i
			break
		}
	}
	if n > 0 && keyAt(bk, n-1) != 0 && (keyAt(bk, n) != 0 || keyAt(ak, n) != 0) {
		for n > 0 && keyAt(bk, n-1) != 0 {
			n--
		}
	}
	return n
}

// keyAt is the media key of position i of a history with keys k: 0 for a
// token, and past the end.
func keyAt(k []uint64, i int) uint64 {
	if i < len(k) {
		return k[i]
	}
	return 0
}

func hasMedia(keys []uint64) bool {
	for _, k := range keys {
		if k != 0 {
			return true
		}
	}
	return false
}

// mediaKey is the key of an input embedding: a 64-bit hash of its width and
// values, seeded per Cache, never 0 (the key of a token).
func (c *Cache) mediaKey(e []float32) uint64 {
	h := mix(c.seed ^ uint64(len(e)))
	i := 0
	for ; i+1 < len(e); i += 2 {
		h = mix(h ^ (uint64(math.Float32bits(e[i])) | uint64(math.Float32bits(e[i+1]))<<32))
	}
	if i < len(e) {
		h = mix(h ^ uint64(math.Float32bits(e[i])))
	}
	h = mix(h ^ h>>29)
	return max(h, 1)
}

// mix is a bijection of the 64-bit words that spreads every input bit over
// the output.
func mix(h uint64) uint64 {
	h *= 0xbf58476d1ce4e5b9
	return h ^ h>>31
}

// feedKeys computes the media keys of the feeds with embeddings into
// c.fkeys, feed i's from c.fkeyAt[i].
func (c *Cache) feedKeys(feeds []backend.Feed) {
	c.fkeys, c.fkeyAt = c.fkeys[:0], c.fkeyAt[:0]
	for _, f := range feeds {
		if f.Embd == nil {
			c.fkeyAt = append(c.fkeyAt, -1)
			continue
		}
		c.fkeyAt = append(c.fkeyAt, len(c.fkeys))
		c.fkeys = c.appendKeys(c.fkeys, f.Embd)
	}
}

// appendKeys appends the media key of each entry of embd to dst.
func (c *Cache) appendKeys(dst []uint64, embd [][]float32) []uint64 {
	for _, e := range embd {
		var k uint64
		if e != nil {
			k = c.mediaKey(e)
		}
		dst = append(dst, k)
	}
	return dst
}

// keysOf is the media keys of feed i of n tokens, nil when it has no
// embeddings.
func (c *Cache) keysOf(i, n int) []uint64 {
	at := c.fkeyAt[i]
	if at < 0 {
		return nil
	}
	return c.fkeys[at : at+n]
}

// extend appends toks, with their media keys (nil: tokens alone), to the
// history of slot.
func (c *Cache) extend(slot int, toks []int32, keys []uint64) {
	if len(c.keys[slot]) == 0 && !hasMedia(keys) {
		c.hist[slot] = append(c.hist[slot], toks...)
		return
	}
	for len(c.keys[slot]) < len(c.hist[slot]) {
		c.keys[slot] = append(c.keys[slot], 0)
	}
	c.hist[slot] = append(c.hist[slot], toks...)
	if keys == nil {
		for range toks {
			c.keys[slot] = append(c.keys[slot], 0)
		}
		return
	}
	c.keys[slot] = append(c.keys[slot], keys...)
}
