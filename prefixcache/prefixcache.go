// Package prefixcache reuses evaluated prompt prefixes: [Cache] is a
// [backend.Backend] over another one that keeps the histories of cleared
// slots (a llama.cpp sequence's KV cells) in slots of its own and starts a
// new sequence from the one that shares the longest prefix with it, so that
// only the rest is evaluated. The second turn of a chat, or every request
// that opens with the same system prompt, then costs its new tokens only.
//
//	lb, _ := llamabackend.New(ctx)            // a context of 4 sequences
//	pc, _ := prefixcache.New(lb, prefixcache.Options{CacheSlots: 2, MaxCells: 8192})
//	gen := generation.NewGenerator(pc, tok)   // 2 slots for requests
//
// The reuse changes nothing in what is generated: a slot holds the same
// history, in the same positions, as if its whole prompt had been evaluated
// (exactly so on [backend.MemoryBackend]; on llama.cpp the cells of the
// prefix were computed in other batches, which with an f32 KV cache gives
// the same tokens). The last token of a feed is always evaluated, even when
// a cached sequence holds all of it, because its logits are the feed's
// result.
//
// # Slots
//
// The underlying backend's slots are split: the first Slots() serve the
// caller, the remaining Options.CacheSlots are spare room for cached
// sequences. The assignment moves: a cleared slot's history becomes an
// entry of the cache where it lies (no copy), and the caller's slot
// continues in a free one, or in none until its next feed; a feed that
// extends a whole entry takes the entry's slot over the same way. A feed
// that shares part of an entry copies it (Backend.Copy, then Truncate)
// when a free slot can take the copy, and otherwise takes the entry's slot
// over and truncates it there.
//
// With CacheSlots 0 the cache needs no memory of its own, as llama.cpp's
// server keeps prompts: the cells of finished requests stay in the caller's
// slots until a new sequence needs the room, and a new one starts from the
// finished one it shares the longest prefix with. Live slots are sources too: a request that shares its system
// prompt with a running one copies it from there. [Cache.Lookup] and
// [Cache.Adopt] name underlying slots, for saving an entry's state and for
// loading one.
//
// # Eviction
//
// Entries are evicted least recently used first (a hit or an adoption is a
// use), to keep their tokens within Options.MaxCells and when a cleared slot
// needs a cache slot and none is free. An entry that is a prefix of a newer
// one is dropped, because the newer one serves every lookup it would. A
// history longer than MaxCells is not kept, nor one left undefined by a
// failed Eval, nor one that Copy wrote and no Eval extended since (without
// a unified cache llama.cpp copies the cells at the next decode, so its
// state could not be saved yet).
//
// With a llama.cpp context whose sequences share one unified KV cache,
// cached cells take room that the live sequences may need: choose MaxCells
// to leave them enough. When an Eval reports backend.ErrContextFull, the
// cache drops every entry, so that the caller's next attempt has the room.
// Without a unified cache each llama.cpp sequence has cells of its own, and
// a partial copy costs a copy of the whole source stream at the next decode.
//
// # Media
//
// A Cache implements [backend.EmbeddingInput] over a backend that does: a
// feed's input embeddings (an image's or a sound's, Feed.Embd) are passed
// on, and each position holding one is compared by a 64-bit hash of its
// values as well as by its placeholder token, so that placeholders never
// match across different media, and the same medium at the same place
// (the second turn of a chat about an image) is reused. A reused prefix
// never ends inside a run of embeddings, of the new prompt or of the
// history it is taken from: a medium is reused whole or evaluated whole,
// as an image whose positions attend to each other needs. [Cache.Adopt]
// makes entries of tokens alone.
package prefixcache

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"

	"github.com/llamaloop/llamaloop/backend"
)

// Options configure a Cache.
type Options struct {
	// CacheSlots is how many of the underlying backend's slots are kept
	// for cached sequences alone (fewer than the backend's slots). With 0,
	// entries live in the slots that a new sequence does not need yet.
	CacheSlots int
	// MaxCells bounds the tokens held by all entries together; 0 means no
	// bound beyond the cache slots.
	MaxCells int
	// MinShared is the shortest shared prefix worth reusing (default 1). A
	// partial copy between llama.cpp sequences without a unified cache
	// copies a whole stream, which costs more than evaluating a few tokens.
	MinShared int
}

// Stats count what a Cache did since it was made. Every field is read
// atomically: Stats may be called from any goroutine while the cache works
// (a server's metrics).
type Stats struct {
	// Lookups counts feeds that started an empty slot; Hits those of them
	// that reused a prefix.
	Lookups, Hits int64
	// PromptTokens counts the tokens of those feeds; TokensSaved the tokens
	// of theirs that were not evaluated because a prefix held them.
	PromptTokens, TokensSaved int64
	// Kept counts cleared histories kept as entries; Evictions entries
	// dropped to make room (dropped redundant prefixes not included).
	Kept, Evictions int64
	// Entries and Cells are the entries held now and their tokens.
	Entries, Cells int64
}

// HitRate is Hits/Lookups, or 0 before any lookup.
func (s Stats) HitRate() float64 {
	if s.Lookups == 0 {
		return 0
	}
	return float64(s.Hits) / float64(s.Lookups)
}

// entry is one cached sequence: the underlying slot that holds it, its
// tokens and their media keys.
type entry struct {
	slot   int
	tokens []int32
	keys   []uint64 // empty, or per token its mediaKey (0: a token)
	used   uint64   // the clock at its last use, for LRU
}

// Cache is a backend.Backend that reuses evaluated prefixes; see the
// package documentation. Like every Backend it is not safe for concurrent
// use, except for Stats.
type Cache struct {
	b    backend.Backend
	opts Options

	// phys[s] is the underlying slot of the caller's slot s; -1 while s is
	// empty and no underlying slot was free when it was cleared (its
	// next feed takes one, evicting an entry if it must).
	phys []int
	hist [][]int32 // hist[s] is the history of the caller's slot s
	// keys[s] is empty while hist[s] holds no input embedding, and then
	// has one mediaKey per token of hist[s] (0 for a token).
	keys  [][]uint64
	dirty []bool // hist[s] is unknown (a failed Eval): never kept
	// copied[s]: slot s was last written by Copy. A llama.cpp sequence
	// copied without a unified cache gets its cells at the next decode, so
	// its state cannot be saved before: such a history is not kept.
	copied []bool
	// entries, in no order; free lists the underlying slots that are
	// neither a caller's nor an entry's (all empty).
	entries []*entry
	free    []int
	spare   []*entry // dropped entries, for reuse with their buffers
	cells   int
	clock   uint64
	// emptyRoom is the room of an empty underlying slot, at New: the Room
	// of a caller's slot that has none.
	emptyRoom int

	feeds []backend.Feed // the rewritten feeds of an Eval
	cut   []int          // tokens of each feed that a reused prefix covered
	// fkeys holds the media keys of an Eval's feeds with embeddings, from
	// fkeyAt[i] for feed i (-1 for a feed without), or those of a Lookup.
	fkeys  []uint64
	fkeyAt []int
	seed   uint64 // of mediaKey

	lookups, hits, promptTokens, saved, kept, evictions, nEntries, nCells atomic.Int64
}

// New returns a Cache over b, which must be empty (all slots cleared): its
// first b.Slots()-o.CacheSlots slots serve the caller at first.
func New(b backend.Backend, o Options) (*Cache, error) {
	if o.CacheSlots < 0 || o.CacheSlots >= b.Slots() {
		return nil, fmt.Errorf("prefixcache: CacheSlots %d: want 0 to %d (the backend has %d slots)", o.CacheSlots, b.Slots()-1, b.Slots())
	}
	if o.MaxCells < 0 {
		return nil, fmt.Errorf("prefixcache: MaxCells %d < 0", o.MaxCells)
	}
	if o.MaxCells == 0 {
		o.MaxCells = math.MaxInt
	}
	if o.MinShared < 1 {
		o.MinShared = 1
	}
	n := b.Slots() - o.CacheSlots
	c := &Cache{b: b, opts: o, phys: make([]int, n), hist: make([][]int32, n), keys: make([][]uint64, n), dirty: make([]bool, n),
		copied: make([]bool, n), emptyRoom: b.Room(0), seed: rand.Uint64()}
	for s := range n {
		c.phys[s] = s
	}
	for s := b.Slots() - 1; s >= n; s-- {
		c.free = append(c.free, s)
	}
	return c, nil
}

// Backend returns the underlying backend.
func (c *Cache) Backend() backend.Backend { return c.b }

// Stats returns the counters; safe to call concurrently with every method.
func (c *Cache) Stats() Stats {
	return Stats{
		Lookups: c.lookups.Load(), Hits: c.hits.Load(),
		PromptTokens: c.promptTokens.Load(), TokensSaved: c.saved.Load(),
		Kept: c.kept.Load(), Evictions: c.evictions.Load(),
		Entries: c.nEntries.Load(), Cells: c.nCells.Load(),
	}
}

// VocabSize implements backend.Backend.
func (c *Cache) VocabSize() int { return c.b.VocabSize() }

// Slots implements backend.Backend: the underlying slots less the cache's.
func (c *Cache) Slots() int { return len(c.phys) }

func (c *Cache) checkSlot(slot int) error {
	if slot < 0 || slot >= len(c.phys) {
		return fmt.Errorf("prefixcache: slot %d out of range [0,%d)", slot, len(c.phys))
	}
	return nil
}

// Room implements backend.Backend: the room of the underlying slot that
// serves slot now, or that of an empty one when slot has none yet.
func (c *Cache) Room(slot int) int {
	if slot < 0 || slot >= len(c.phys) {
		return 0
	}
	if c.phys[slot] < 0 {
		return c.emptyRoom
	}
	return c.b.Room(c.phys[slot])
}

// acquire gives slot an underlying slot when it has none: a free one, or
// that of the least recently used entry, evicted.
func (c *Cache) acquire(slot int) error {
	if c.phys[slot] >= 0 {
		return nil
	}
	if len(c.free) == 0 {
		if len(c.entries) == 0 {
			// Cannot happen: a caller's slot without an underlying slot
			// left one to an entry or to the free list.
			return fmt.Errorf("prefixcache: slot %d: no underlying slot free", slot)
		}
		if err := c.evictLRU(); err != nil {
			return err
		}
	}
	c.phys[slot] = c.free[len(c.free)-1]
	c.free = c.free[:len(c.free)-1]
	return nil
}

// Eval implements backend.Backend. A feed that starts an empty slot first
// takes the longest prefix that an entry or another slot holds (all but
// its last token at most), then the rest is evaluated with the other feeds
// in one underlying Eval.
func (c *Cache) Eval(ctx context.Context, feeds []backend.Feed) error {
	return c.eval(ctx, feeds, nil)
}

// EvalAll implements backend.AllLogits over an underlying backend that
// implements it (and fails over one that does not): the positions of a
// feed that a reused prefix covered have no logits (LogitsAt returns nil
// for them), since they were not evaluated.
func (c *Cache) EvalAll(ctx context.Context, feeds []backend.Feed) error {
	all, ok := c.b.(backend.AllLogits)
	if !ok {
		return errors.New("prefixcache: the underlying backend does not keep every position's logits (backend.AllLogits)")
	}
	return c.eval(ctx, feeds, all)
}

// LogitsAt implements backend.AllLogits.
func (c *Cache) LogitsAt(i, j int) []float32 {
	all, ok := c.b.(backend.AllLogits)
	if !ok || i < 0 || i >= len(c.cut) || j < c.cut[i] {
		return nil
	}
	return all.LogitsAt(i, j-c.cut[i])
}

// eval is Eval, and EvalAll through all when it is not nil.
func (c *Cache) eval(ctx context.Context, feeds []backend.Feed, all backend.AllLogits) error {
	c.feeds, c.cut = c.feeds[:0], c.cut[:0]
	for i, f := range feeds {
		if err := c.checkSlot(f.Slot); err != nil {
			return fmt.Errorf("prefixcache: feed %d: %w", i, err)
		}
		if len(f.Tokens) == 0 {
			return fmt.Errorf("prefixcache: feed %d: no tokens", i)
		}
		if _, ok := c.b.(backend.PositionInput); f.Pos != nil && !ok {
			return fmt.Errorf("prefixcache: feed %d: %w: the underlying backend (%T) takes no positions", i, backend.ErrBadPosition, c.b)
		}
		if f.Pos != nil && len(f.Pos) != len(f.Tokens) {
			return fmt.Errorf("prefixcache: feed %d: %w: %d positions for %d tokens", i, backend.ErrBadPosition, len(f.Pos), len(f.Tokens))
		}
		if _, ok := c.b.(backend.NonCausalInput); f.NonCausal != nil && !ok {
			return fmt.Errorf("prefixcache: feed %d: %w: the underlying backend (%T) takes no non-causal runs", i, backend.ErrBadEmbedding, c.b)
		}
		if f.Embd == nil {
			continue
		}
		if _, ok := c.b.(backend.EmbeddingInput); !ok {
			return fmt.Errorf("prefixcache: feed %d: %w: the underlying backend (%T) takes no input embeddings", i, backend.ErrBadEmbedding, c.b)
		}
		if len(f.Embd) != len(f.Tokens) {
			return fmt.Errorf("prefixcache: feed %d: %w: %d embedding entries for %d tokens", i, backend.ErrBadEmbedding, len(f.Embd), len(f.Tokens))
		}
	}
	for i, f := range feeds {
		for j := range i {
			if feeds[j].Slot == f.Slot {
				return fmt.Errorf("prefixcache: feeds %d and %d share slot %d", j, i, f.Slot)
			}
		}
	}
	c.feedKeys(feeds)
	for i, f := range feeds {
		toks, embd, pos, runs, keys := f.Tokens, f.Embd, f.Pos, f.NonCausal, c.keysOf(i, len(f.Tokens))
		if len(c.hist[f.Slot]) == 0 && !c.dirty[f.Slot] {
			n, err := c.reuse(f.Slot, toks, keys)
			if err != nil {
				for _, f := range feeds {
					c.dirty[f.Slot] = true // the contract: Clear them
				}
				clear(c.feeds)
				return err
			}
			toks = toks[n:]
			if embd != nil {
				embd = embd[n:]
			}
			if pos != nil {
				pos = pos[n:]
			}
			if runs, err = skipRuns(runs, n); err != nil {
				for _, f := range feeds {
					c.dirty[f.Slot] = true
				}
				clear(c.feeds)
				return fmt.Errorf("prefixcache: feed %d: %w", i, err)
			}
		}
		if err := c.acquire(f.Slot); err != nil {
			for _, f := range feeds {
				c.dirty[f.Slot] = true
			}
			clear(c.feeds)
			return err
		}
		c.cut = append(c.cut, len(f.Tokens)-len(toks))
		under := f
		under.Slot, under.Tokens, under.Embd, under.Pos, under.NonCausal = c.phys[f.Slot], toks, embd, pos, runs
		c.feeds = append(c.feeds, under)
	}
	var err error
	if all != nil {
		err = all.EvalAll(ctx, c.feeds)
	} else {
		err = c.b.Eval(ctx, c.feeds)
	}
	if err == nil {
		for i, f := range feeds {
			keys := c.keysOf(i, len(f.Tokens))
			if keys != nil {
				keys = keys[c.cut[i]:]
			}
			c.extend(f.Slot, c.feeds[i].Tokens, keys)
			c.copied[f.Slot] = false
		}
	}
	clear(c.feeds) // drop the references to the caller's tokens
	if err != nil {
		for _, f := range feeds {
			c.dirty[f.Slot] = true
		}
		if errors.Is(err, backend.ErrContextFull) {
			c.dropAll()
		}
		return err
	}
	return nil
}

// reuse starts the empty slot from the longest prefix of toks (all but its
// last token at most) that an entry or another live slot holds, and returns
// its length: 0 when none is worth it.
func (c *Cache) reuse(slot int, toks []int32, keys []uint64) (int, error) {
	c.lookups.Add(1)
	c.promptTokens.Add(int64(len(toks)))
	limit := len(toks) - 1
	best, bestLen, bestLive := (*entry)(nil), 0, -1
	for _, e := range c.entries {
		n := match(e.tokens, e.keys, toks, keys, limit)
		if n > bestLen || (n == bestLen && n > 0 && best != nil && e.used > best.used) {
			best, bestLen = e, n
		}
	}
	for s, h := range c.hist {
		if s == slot || c.dirty[s] {
			continue
		}
		if n := match(h, c.keys[s], toks, keys, limit); n > bestLen {
			best, bestLen, bestLive = nil, n, s
		}
	}
	if bestLen < c.opts.MinShared {
		return 0, nil
	}
	whole := best != nil && match(best.tokens, best.keys, toks, keys, len(toks)) == len(best.tokens)
	if best != nil && !whole && c.phys[slot] < 0 && len(c.free) == 0 {
		// No slot can take a copy without evicting an entry: take over
		// the one, among those that share as much, used least recently.
		for _, e := range c.entries {
			if e.used < best.used && match(e.tokens, e.keys, toks, keys, limit) == bestLen {
				best = e
			}
		}
		whole = true
	}
	switch {
	case bestLive >= 0:
		if err := c.acquire(slot); err != nil {
			return 0, err
		}
		if err := c.copyPrefix(slot, c.phys[bestLive], bestLen); err != nil {
			return 0, err
		}
	case whole:
		// The feed extends the whole entry (or repeats it: then its last
		// token is evaluated again), or nothing can take a copy: the slot
		// takes the entry's underlying slot over, and its own empty one,
		// if any, becomes free. The slot's history will cover the entry's
		// when it is cleared.
		if bestLen < len(best.tokens) {
			if err := c.b.Truncate(best.slot, bestLen); err != nil {
				return 0, fmt.Errorf("prefixcache: truncate slot %d to %d: %w", best.slot, bestLen, err)
			}
		}
		if c.phys[slot] >= 0 {
			c.free = append(c.free, c.phys[slot])
		}
		c.phys[slot] = best.slot
		c.removeEntry(best)
	default:
		c.touch(best) // not the least recently used, which acquire may evict
		if err := c.acquire(slot); err != nil {
			return 0, err
		}
		if err := c.copyPrefix(slot, best.slot, bestLen); err != nil {
			return 0, err
		}
	}
	c.hist[slot] = append(c.hist[slot][:0], toks[:bestLen]...)
	c.keys[slot] = c.keys[slot][:0]
	if hasMedia(keys[:min(bestLen, len(keys))]) {
		c.keys[slot] = append(c.keys[slot], keys[:bestLen]...)
	}
	c.hits.Add(1)
	c.saved.Add(int64(bestLen))
	return bestLen, nil
}

// copyPrefix makes the caller's slot hold the first n tokens of the
// underlying slot src.
func (c *Cache) copyPrefix(slot, src, n int) error {
	dst := c.phys[slot]
	if err := c.b.Copy(dst, src); err != nil {
		return fmt.Errorf("prefixcache: copy slot %d to %d: %w", src, dst, err)
	}
	if err := c.b.Truncate(dst, n); err != nil {
		c.b.Clear(dst)
		return fmt.Errorf("prefixcache: truncate slot %d to %d: %w", dst, n, err)
	}
	return nil
}

// sharedPrefix is the length of the common prefix of a and b, at most limit.
func sharedPrefix(a, b []int32, limit int) int {
	n := min(len(a), len(b), limit)
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// Logits implements backend.Backend.
func (c *Cache) Logits(i int) []float32 { return c.b.Logits(i) }

// Copy implements backend.Backend.
func (c *Cache) Copy(dst, src int) error {
	if err := c.checkSlot(dst); err != nil {
		return err
	}
	if err := c.checkSlot(src); err != nil {
		return err
	}
	if dst == src {
		return nil
	}
	if c.phys[src] < 0 { // src is empty
		return c.Clear(dst)
	}
	if err := c.acquire(dst); err != nil {
		c.dirty[dst] = true
		return err
	}
	if err := c.b.Copy(c.phys[dst], c.phys[src]); err != nil {
		c.dirty[dst] = true
		return err
	}
	c.hist[dst] = append(c.hist[dst][:0], c.hist[src]...)
	c.keys[dst] = append(c.keys[dst][:0], c.keys[src]...)
	c.dirty[dst] = c.dirty[src]
	c.copied[dst] = true
	return nil
}

// Truncate implements backend.Backend.
func (c *Cache) Truncate(slot, n int) error {
	if err := c.checkSlot(slot); err != nil {
		return err
	}
	if c.phys[slot] < 0 { // empty
		return nil
	}
	if err := c.b.Truncate(c.phys[slot], n); err != nil {
		return err
	}
	if n <= len(c.hist[slot]) {
		c.hist[slot] = c.hist[slot][:n]
	}
	if n <= len(c.keys[slot]) {
		c.keys[slot] = c.keys[slot][:n]
	}
	return nil
}

// Clear implements backend.Backend: the slot's history is kept as an entry
// when it is known and fits, and the slot continues empty in a free
// underlying slot, or in none until its next feed.
func (c *Cache) Clear(slot int) error {
	if err := c.checkSlot(slot); err != nil {
		return err
	}
	if c.phys[slot] < 0 { // empty already
		c.hist[slot], c.keys[slot] = c.hist[slot][:0], c.keys[slot][:0]
		c.dirty[slot], c.copied[slot] = false, false
		return nil
	}
	h := c.hist[slot]
	if len(h) == 0 || c.dirty[slot] || c.copied[slot] || !c.keep(slot) {
		if err := c.b.Clear(c.phys[slot]); err != nil {
			return err
		}
	}
	c.hist[slot], c.keys[slot] = c.hist[slot][:0], c.keys[slot][:0]
	c.dirty[slot], c.copied[slot] = false, false
	return nil
}

// keep turns the history of slot into an entry, reports whether it did,
// and gives slot an empty underlying slot if one is free (none otherwise).
func (c *Cache) keep(slot int) bool {
	h, hk := c.hist[slot], c.keys[slot]
	if len(h) > c.opts.MaxCells {
		return false
	}
	for _, e := range c.entries {
		if len(e.tokens) >= len(h) && match(e.tokens, e.keys, h, hk, len(h)) == len(h) {
			c.touch(e) // an entry already serves every lookup this one would
			return false
		}
	}
	// Entries that are prefixes of h are redundant from now on.
	for i := 0; i < len(c.entries); {
		e := c.entries[i]
		if match(e.tokens, e.keys, h, hk, len(e.tokens)) == len(e.tokens) {
			if c.dropEntry(e) != nil {
				return false
			}
			continue
		}
		i++
	}
	for c.cells+len(h) > c.opts.MaxCells {
		if len(c.entries) == 0 || c.evictLRU() != nil {
			return false
		}
	}
	e := c.newEntry(c.phys[slot], h, hk)
	c.entries = append(c.entries, e)
	c.cells += len(h)
	c.phys[slot] = -1
	if n := len(c.free); n > 0 {
		c.phys[slot] = c.free[n-1]
		c.free = c.free[:n-1]
	}
	c.kept.Add(1)
	c.publish()
	return true
}

func (c *Cache) newEntry(slot int, tokens []int32, keys []uint64) *entry {
	var e *entry
	if n := len(c.spare); n > 0 {
		e, c.spare = c.spare[n-1], c.spare[:n-1]
	} else {
		e = new(entry)
	}
	e.slot = slot
	e.tokens = append(e.tokens[:0], tokens...)
	e.keys = append(e.keys[:0], keys...)
	c.touch(e)
	return e
}

func (c *Cache) touch(e *entry) {
	c.clock++
	e.used = c.clock
}

// removeEntry forgets e without clearing its slot (taken over by a caller's
// slot).
func (c *Cache) removeEntry(e *entry) {
	for i, x := range c.entries {
		if x == e {
			c.entries[i] = c.entries[len(c.entries)-1]
			c.entries[len(c.entries)-1] = nil
			c.entries = c.entries[:len(c.entries)-1]
			break
		}
	}
	c.cells -= len(e.tokens)
	c.spare = append(c.spare, e)
	c.publish()
}

// dropEntry clears e's slot, frees it and forgets e.
func (c *Cache) dropEntry(e *entry) error {
	if err := c.b.Clear(e.slot); err != nil {
		return fmt.Errorf("prefixcache: clear cached slot %d: %w", e.slot, err)
	}
	c.free = append(c.free, e.slot)
	c.removeEntry(e)
	return nil
}

func (c *Cache) evictLRU() error {
	var lru *entry
	for _, e := range c.entries {
		if lru == nil || e.used < lru.used {
			lru = e
		}
	}
	if err := c.dropEntry(lru); err != nil {
		return err
	}
	c.evictions.Add(1)
	return nil
}

// dropAll evicts every entry (errors ignored: a slot that cannot be cleared
// is lost to the cache either way).
func (c *Cache) dropAll() {
	for len(c.entries) > 0 {
		e := c.entries[len(c.entries)-1]
		c.b.Clear(e.slot)
		c.free = append(c.free, e.slot)
		c.removeEntry(e)
		c.evictions.Add(1)
	}
}

func (c *Cache) publish() {
	c.nEntries.Store(int64(len(c.entries)))
	c.nCells.Store(int64(c.cells))
}

// Lookup returns the underlying slot of the entry that shares the longest
// prefix with tokens and their input embeddings embd (nil, or one entry
// per token as in backend.Feed), the length of that prefix and the number
// of tokens the entry holds (slot -1 and zeros when no entry shares any).
// The slot is valid until the next call of a method other than Lookup and
// Stats. A program saves an entry's state through it.
func (c *Cache) Lookup(tokens []int32, embd [][]float32) (slot, shared, held int) {
	slot = -1
	if embd != nil && len(embd) != len(tokens) {
		return slot, 0, 0
	}
	var keys []uint64
	if embd != nil {
		c.fkeys = c.appendKeys(c.fkeys[:0], embd)
		keys = c.fkeys
	}
	for _, e := range c.entries {
		if n := match(e.tokens, e.keys, tokens, keys, len(tokens)); n > shared {
			slot, shared, held = e.slot, n, len(e.tokens)
		}
	}
	return slot, shared, held
}

var (
	_ backend.PrefixLookup   = (*Cache)(nil)
	_ backend.AllLogits      = (*Cache)(nil)
	_ backend.EmbeddingInput = (*Cache)(nil)
)

// Adopt makes a cache entry of tokens whose state fill writes into the
// empty underlying slot it is given (for example a sequence state read from
// a file). The entry holds tokens alone, no media keys: a state of a
// history with input embeddings is not for Adopt. It evicts what it must to make room first; when fill fails the
// slot is cleared and the cache holds no entry for tokens.
func (c *Cache) Adopt(tokens []int32, fill func(slot int) error) error {
	if len(tokens) == 0 {
		return errors.New("prefixcache: adopt: no tokens")
	}
	if len(tokens) > c.opts.MaxCells {
		return fmt.Errorf("prefixcache: adopt: %d tokens exceed MaxCells %d", len(tokens), c.opts.MaxCells)
	}
	for len(c.free) == 0 || c.cells+len(tokens) > c.opts.MaxCells {
		if len(c.entries) == 0 {
			return errors.New("prefixcache: adopt: no cache slot")
		}
		if err := c.evictLRU(); err != nil {
			return err
		}
	}
	slot := c.free[len(c.free)-1]
	if err := fill(slot); err != nil {
		c.b.Clear(slot)
		return err
	}
	c.free = c.free[:len(c.free)-1]
	c.entries = append(c.entries, c.newEntry(slot, tokens, nil))
	c.cells += len(tokens)
	c.publish()
	return nil
}

var _ backend.Backend = (*Cache)(nil)
var (
	_ backend.PositionInput  = (*Cache)(nil)
	_ backend.NonCausalInput = (*Cache)(nil)
)
