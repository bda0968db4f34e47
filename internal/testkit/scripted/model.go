// Package scripted is a model that runs without llama.cpp, for the tests
// of what sits above the decoding loop (internal/serve): a Tokenizer over a
// testmodel.Vocab that tokenizes as llama.cpp does, and a Model, a
// backend.Backend over backend.MemoryBackend whose logits come from a
// Script: the demo model's Markov chain (Markov), a text the model writes
// after any prompt (Tokenizer.Says, Writes), a reply chosen from the prompt
// (Replies), or any function of the prompt and the tokens generated. It
// builds with CGO_ENABLED=0.
//
// A server test without llama.cpp:
//
//	tok, m, err := scripted.Demo(2, 256) // two sequences of 256 tokens
//	m.SetScript(tok.Says(`<tool_call>{"name":"f","arguments":{}}</tool_call>`))
//	e, err := scripted.NewEngine(m, tok)
//	defer e.Close()
//	srv := serve.New(serve.Config{Engine: e, Tokenizer: tok, ModelID: "demo", SequenceSize: m.Room(0)})
//
// Every request then gets that text (its tokens, then </s>) at any
// temperature; a logprob lists the other tokens at ForcedGap below.
package scripted

import (
	"context"
	"sync"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
)

// Script gives the next-token logits of a sequence: prompt is the tokens
// of its prompt, generated the tokens generated after it. Neither slice may
// be kept or modified. The row must have the model's vocabulary size; the
// model copies it. A Script runs on the engine's goroutine.
type Script func(prompt, generated []int32) []float32

// Model is a backend.Backend over a backend.MemoryBackend whose logits
// come from a Script. A slot's prompt is what was fed to it while it was
// empty, and every later feed of more than one token (a prompt evaluated in
// chunks): the engine of NewEngine feeds a prompt whole and then one token
// per step.
type Model struct {
	mem *backend.MemoryBackend

	mu     sync.Mutex
	script Script
	before func()

	// Written and read on the engine's goroutine only.
	prompt []int          // per slot: the length of its prompt
	feeds  []backend.Feed // of the Eval in progress
	next   int            // the feed whose logits the memory backend asks for next
}

// NewModel returns a model of vocab tokens and slots sequences of size
// tokens each (size <= 0: unbounded) running script.
func NewModel(vocab, slots, size int, script Script) *Model {
	m := &Model{script: script, prompt: make([]int, slots)}
	m.mem = backend.NewMemoryBackend(vocab, slots, m.logits)
	m.mem.SetCapacity(size)
	return m
}

// SetScript makes the model run script from its next evaluation on.
func (m *Model) SetScript(script Script) {
	m.mu.Lock()
	m.script = script
	m.mu.Unlock()
}

// SetBeforeEval makes every Eval call f first, on the engine's goroutine
// (nil: nothing): a test holds the engine there, or counts its steps.
func (m *Model) SetBeforeEval(f func()) {
	m.mu.Lock()
	m.before = f
	m.mu.Unlock()
}

// Memory returns the backend underneath, for its histories and counters.
func (m *Model) Memory() *backend.MemoryBackend { return m.mem }

func (m *Model) logits(history []int32) ([]float32, error) {
	slot := m.feeds[m.next].Slot
	m.next++
	m.mu.Lock()
	script := m.script
	m.mu.Unlock()
	n := min(m.prompt[slot], len(history))
	return script(history[:n], history[n:]), nil
}

// VocabSize implements backend.Backend.
func (m *Model) VocabSize() int { return m.mem.VocabSize() }

// Slots implements backend.Backend.
func (m *Model) Slots() int { return m.mem.Slots() }

// Room implements backend.Backend.
func (m *Model) Room(slot int) int { return m.mem.Room(slot) }

// Eval implements backend.Backend.
func (m *Model) Eval(ctx context.Context, feeds []backend.Feed) error {
	m.mu.Lock()
	before := m.before
	m.mu.Unlock()
	if before != nil {
		before()
	}
	for _, f := range feeds {
		if f.Slot < 0 || f.Slot >= len(m.prompt) {
			continue // the memory backend refuses it
		}
		if n := len(m.mem.History(f.Slot)); n == 0 || len(f.Tokens) > 1 {
			m.prompt[f.Slot] = n + len(f.Tokens)
		}
	}
	m.feeds, m.next = feeds, 0
	defer func() { m.feeds = nil }()
	return m.mem.Eval(ctx, feeds)
}

// Logits implements backend.Backend.
func (m *Model) Logits(i int) []float32 { return m.mem.Logits(i) }

// Copy implements backend.Backend.
func (m *Model) Copy(dst, src int) error {
	if err := m.mem.Copy(dst, src); err != nil {
		return err
	}
	m.prompt[dst] = m.prompt[src]
	return nil
}

// Clear implements backend.Backend.
func (m *Model) Clear(slot int) error {
	if err := m.mem.Clear(slot); err != nil {
		return err
	}
	m.prompt[slot] = 0
	return nil
}

// Truncate implements backend.Backend.
func (m *Model) Truncate(slot, n int) error {
	if err := m.mem.Truncate(slot, n); err != nil {
		return err
	}
	m.prompt[slot] = min(m.prompt[slot], n)
	return nil
}

// NewEngine returns an engine over m and tok that evaluates each prompt in
// one step, as Model expects.
func NewEngine(m *Model, tok backend.Tokenizer) (*generation.Engine, error) {
	return generation.NewEngine(m, tok, generation.EngineOptions{PromptChunk: -1})
}

var demo = sync.OnceValues(testmodel.NewDemo)

// Demo returns the demo model of testmodel.NewDemo in Go: its tokenizer,
// and a model of slots sequences of size tokens running its Markov chain.
func Demo(slots, size int) (*Tokenizer, *Model, error) {
	d, err := demo()
	if err != nil {
		return nil, nil, err
	}
	return NewTokenizer(d.Spec.Vocab), NewModel(d.Spec.Vocab.Size(), slots, size, Markov(d.Markov)), nil
}

// DemoModel returns the demo model itself (shared: do not modify it).
func DemoModel() (*testmodel.Demo, error) { return demo() }

var _ backend.Backend = (*Model)(nil)
