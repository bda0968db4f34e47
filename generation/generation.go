// Package generation is the decoding loop: it evaluates a batch of prompts
// on a [backend.Backend] (in memory, or llama.cpp through package
// llamacpp/llamabackend), applies the processors of package logits to each
// request's next-token logits, chooses each request's next token (greedy,
// seeded sampling or Mirostat) and repeats until every request stops.
//
// # Words
//
// A request is one sequence of the batch: one [Request] given to Stream,
// identified in events by its index (Event.Request). A row is what it
// means in packages logits and mirostat: one sequence's next-token scores,
// a []float32 as wide as the vocabulary. Each request's processors keep
// their state in a [logits.History].
//
// # Requests and the batch
//
// Each request has its own prompt, configuration, seed and lengths. Nothing
// is padded: every request holds one backend slot (a llama.cpp sequence),
// the requests that need a step share one Backend.Eval, a request that
// finishes leaves the batch at once and its slot is cleared, and requests
// beyond the backend's slots wait for a free slot. A prompt is evaluated in
// the same Eval as the other requests' new tokens; the backend splits it
// into batches.
//
// # Continuous batching
//
// An [Engine] keeps the loop running: [Engine.Submit] adds a request to the
// batch while it runs, the request leaves it when it finishes, and its
// events come from its own [Task], with its own context for cancellation.
// Prompts are evaluated in chunks (EngineOptions.PromptChunk tokens per
// step over all requests), so a long prompt that arrives does not stall the
// requests already generating. Stream and the Engine run the same loop, and
// what Batch invariance says of a batch holds for an Engine's too.
//
// # Lengths
//
// A request follows generate() of transformers with its own prompt length
// P. On an encoder-decoder backend (backend.Encoder) the request's prompt
// is the encoder input, evaluated once when the request gets its slot, and
// P is the length of the decoder prompt (1: decoder_start_token_id), as in
// transformers, so max_length and min_length count decoder tokens. Its config is resolved with genconfig.Config.Resolve(P), so
// max_new_tokens gives max_length = P + max_new_tokens, and a request stops
// once P plus its new tokens reach max_length. A prompt of max_length tokens
// or more is an error, as in transformers. min_length, min_new_tokens,
// forced EOS and the other length rules are those of the request's
// logits.Pipeline.
//
// # Token choice
//
// Each request's processor chain ends in a [logits.Chooser], the stage that
// selects the token: [logits.Greedy] when the config does not sample
// (logits.Argmax of the processed scores, the lowest index among equal
// maxima), [logits.Multinomial] when it does (the inverse CDF of
// softmax(scores) at one uniform draw), and with Request.Mirostat a Mirostat
// sampler of the request's own, given one uniform draw per token.
//
// Every draw comes from the request's [logits.Source] seeded with
// Request.Seed, whose documentation derives the uniform from the
// generator's bits. Beam search (package beam) draws from the same Source
// the same way, so a request and a seed give the same tokens through
// Generator.Stream and through beam.Search with one beam, and
// mirostat.Sampler.Stream given a logits.Source draws what the loop's
// Mirostat requests draw. The loop gives each request's processors and
// draws nothing but that request's logits, prompt, config and seed, so a
// request's tokens depend on the other requests of the batch and on the
// backend's batch size only as far as its logits do. They do not match
// torch's random stream, only its distribution.
//
// # Batch invariance
//
// On backend.MemoryBackend a request's logits, and so its tokens, never
// depend on the other requests: batched and alone give the same tokens
// exactly. On llama.cpp (package llamacpp/llamabackend, CPU backend) they
// do through rounding: its kernels depend on how many tokens and
// sequences a decode holds. With llama.cpp's default context a request's
// logits alone and beside others differ by up to about 4e-3 on the
// 3-layer test model and 0.015 on a 12-layer one, and a seeded sampled
// token, a Mirostat token or a near tie under greedy decoding may then
// differ, after which the rest of the request does. In a context made
// with llamacpp.ContextParams.BatchInvariant the llama.cpp backend shapes
// every decode so that each row takes the kernels it takes alone: a
// request's logits, and so its tokens and log-probabilities, are then
// bit-identical alone and batched, however its prompt is chunked (tested
// on a 12-layer model through the Engine). A GPU backend gives no such
// bound.
//
// # Stops
//
// A request ends with a FinishReason: FinishEOS when it produced one of its
// stop tokens (the config's eos_token_id plus the tokenizer's
// end-of-generation tokens), FinishStop when its generated text contains one
// of its stop strings, FinishLength at max_length, FinishContextFull when
// its slot has no room for its prompt or its next token (or an Eval reports
// [backend.ErrContextFull]: every request of that Eval then ends so, and the
// requests still waiting go on), FinishCancelled when the context ends (see
// the cancellation contract of package backend), and FinishError when its
// scores make no choice possible (a NaN, or every score -inf:
// [logits.ErrNoChoice]; torch would pick the NaN, or token 0), with Event.Err
// the processor's own error when one of Request.Processors says why it left
// no choice (a grammar.Processor whose grammar needed more than its
// matcher's budget: the error wraps grammar.ErrBudget). The token
// that ends a request (an EOS token, the token that completes a stop
// string) is part of its output, as in transformers.
//
// # Speculative decoding
//
// Speculative decoding is transformers' assisted decoding, as a property
// of a request: its config's prompt_lookup_num_tokens asks for prompt lookup,
// and a generator (or Engine) with a draft model (Options.Draft, transformers'
// assistant_model) drafts for every other request. At a step, a speculating
// request feeds its last token and its candidates; the target's logits
// after each of them (backend.AllLogits, in the same EvalAll as the other
// requests' tokens) go through the one per-token step, position after
// position, until a candidate is rejected or the request ends: every
// accepted token gets its text, stop strings, stop tokens, lengths,
// log-probabilities and event exactly as a token of a plain step. The
// target's slot then forgets the rejected candidates (Backend.Truncate).
//
// Acceptance (package speculative): at each position the request's own
// chooser draws the token (argmax, a multinomial draw or Mirostat, from
// the request's Source), and the candidate is kept when it is that token.
// The tokens are then exactly those of the plain loop for the same seed:
// greedy, sampling and Mirostat with prompt lookup, greedy and Mirostat
// with a draft model. A sampling request without Mirostat that has a draft
// model uses transformers' speculative sampling instead (speculative.Accept
// with the draft's probabilities), which accepts more candidates and
// follows the target's distribution exactly, with other draws than the
// plain loop's. The draft model runs the request's processors, user
// processors (grammars) included, from a copy of the target's history: the
// draft proposes, the constrained target verifies.
//
// A speculating request's prompt steps evaluate its prompt but the last
// token, so that its first step verifies candidates already. A step that
// verifies candidates evaluates all its feeds with EvalAll, so a prompt
// chunk of another request in that step costs a logits row per token (the
// Engine's PromptChunk bounds it). Speculation is refused on a backend
// without backend.AllLogits, on an encoder-decoder backend, and with a
// draft model for a request with prompt embeddings or positions (which the
// draft model cannot read; prompt lookup takes them); State refuses a request that
// samples with a draft model, whose draft draws a RequestState does not
// hold.
//
// # Text
//
// With a [backend.Tokenizer], each token's bytes are appended to the
// request's text, and events carry the new text with a multi-byte UTF-8
// character held back until its last byte arrives. Stop strings match the
// generated text only (not the prompt), across token boundaries, as
// transformers' StopStringCriteria does: the request stops at the token
// within which a stop string ends.
package generation

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/internal/numeric"
	"github.com/llamaloop/llamaloop/logits"
	"github.com/llamaloop/llamaloop/mirostat"
	"github.com/llamaloop/llamaloop/speculative"
)

// Request is one request of a generation: one sequence of the batch. Exactly
// one of Prompt, Text and Messages gives the prompt; when all are empty the
// prompt is empty (see Generator.PromptTokens).
type Request struct {
	// Prompt is the prompt as token ids, used as they are.
	Prompt []int32
	// Text is the prompt as text, tokenized with the model's special tokens
	// (BOS) added; ParseSpecial also reads special-token text in it (and in
	// the contents of Messages).
	Text         string
	ParseSpecial bool
	// Messages is a chat prompt: rendered by the tokenizer's chat template
	// with an assistant opening, then tokenized with no special tokens
	// added (the template writes them). With a backend.ChatTokenizer only
	// the template's own markers become control tokens: a message holding
	// "<|im_end|>" keeps it as text, unless ParseSpecial.
	Messages []backend.Message
	// DecoderPrompt is, for an encoder-decoder backend (backend.Encoder),
	// the decoder's prompt, transformers' decoder_input_ids; nil means the
	// backend's DecoderStart alone. On such a backend Prompt, Text or
	// Messages give the encoder input, which must not be empty
	// (ErrNoEncoderInput).
	DecoderPrompt []int32
	// PromptEmbeddings, with Prompt, has one entry per prompt token: a
	// non-nil entry is an input embedding evaluated in place of that token
	// (what a vision or audio encoder feeds a decoder). The token stays as
	// its placeholder: processors see it and the lengths count it, as
	// transformers' do for the image token ids in the input_ids of a
	// LLaVA-style model (transformers' generate with inputs_embeds alone,
	// which has no ids, corresponds to placeholders that no processor
	// acts on). It needs a backend implementing backend.EmbeddingInput.
	PromptEmbeddings [][]float32
	// PromptPositions, with Prompt, has one entry per prompt token: its
	// position for a model with multi-position RoPE (Qwen2-VL), which
	// takes an image's embeddings at one temporal position walking the
	// image's grid (backend.Pos; llamacpp.Prompt.Positions gives them);
	// the generated tokens continue after the largest. Such a model takes
	// PromptEmbeddings only with them. It needs a backend implementing
	// backend.PositionInput whose model has M-RoPE; nil means positions
	// 0, 1, 2, ...
	PromptPositions []backend.Pos
	// PromptNonCausal lists runs of PromptEmbeddings ([Start, End) in
	// Prompt, in order, each of embeddings only) whose positions attend to
	// each other both ways, as llama.cpp's mtmd helper decodes a Gemma 3
	// image (llamacpp.Prompt.NonCausal gives them). Each run is evaluated
	// whole in a backend evaluation of its own, with causal attention off
	// (a prompt chunk of the Engine ends before a run or after it); the
	// rest of the prompt and the generated tokens stay causal. It needs a
	// backend implementing backend.NonCausalInput, whose MaxNonCausal
	// bounds a run's length (llama.cpp: the context's n_ubatch).
	PromptNonCausal []backend.Span

	// Config is the request's generation config; nil means
	// genconfig.Default(). When it has no eos_token_id and the
	// generator has a Tokenizer, the request uses a copy with the tokenizer's
	// end-of-generation tokens as eos_token_id, as a model's
	// generation_config.json would give. num_beams must be 1 (beam search
	// is package beam) and num_return_sequences 1 (send the request again
	// with another seed).
	Config *genconfig.Config
	// Processors are user processors, inserted where transformers inserts
	// a logits_processor argument (after the config's processors, before
	// the sampling warpers).
	Processors []logits.Processor
	// Seed seeds the request's logits.Source, the draws of sampling and
	// Mirostat.
	Seed uint64
	// Mirostat, when set, chooses the tokens with a Mirostat sampler of its
	// own after the config's processors (and warpers when do_sample).
	Mirostat *mirostat.Config

	// StopStrings end the request when its generated text contains one of them
	// (needs a Tokenizer).
	StopStrings []string
	// RenderSpecial gives special tokens (EOS, EOT, ...) their text in the
	// request's text; by default they have none.
	RenderSpecial bool
	// TrimLeadingSpace drops one space from the start of the generated
	// text, as transformers' tokenizer.decode(new_tokens) does for
	// SentencePiece vocabularies (Llama, Mistral, Gemma: the decoder ends in
	// Strip(left=1)). By default the text is llama.cpp's pieces as they are,
	// so a first token "▁The" streams as " The": the space that separates
	// it from the prompt, which the prompt plus the text then reproduces
	// exactly. Byte-level BPE vocabularies (GPT-2, Llama 3) keep the space
	// in transformers too, so this option is for SentencePiece models.
	TrimLeadingSpace bool

	// Logprobs asks for the log-probability of each token: the log-softmax
	// of the final scores it was chosen from (transformers'
	// compute_transition_scores with normalize_logits=True). With Mirostat
	// these are the scores given to Mirostat, before its truncation.
	Logprobs bool
	// TopLogprobs asks for up to this many most probable tokens of each
	// step, with their log-probabilities under the same scores as Logprobs.
	// Tokens of probability 0 are never listed.
	TopLogprobs int

	// ObserveScores, when set, is called at each step of the request with the
	// final scores the token is chosen from (transformers' output_scores).
	// The slice is only valid during the call and must not be modified.
	ObserveScores func(scores []float32)
}

// TokenLogprob is a token and its log-probability.
type TokenLogprob struct {
	Token   int32
	Logprob float32
}

// FinishReason tells why a request ended.
type FinishReason int

// The reasons a request ends. NotFinished is the zero value, carried by every
// event but a request's last.
const (
	NotFinished       FinishReason = iota
	FinishEOS                      // a stop token (eos_token_id or end of generation)
	FinishStop                     // a stop string
	FinishLength                   // max_length (max_new_tokens)
	FinishContextFull              // no room left in the request's backend slot
	FinishCancelled                // the context ended
	FinishError                    // the scores allow no choice (a processor failed); see Event.Err
)

var finishNames = [...]string{"", "eos", "stop", "length", "context full", "cancelled", "error"}

// String returns "eos", "stop", "length", "context full", "cancelled",
// "error", or "" for NotFinished.
func (f FinishReason) String() string {
	if f < 0 || int(f) >= len(finishNames) {
		return "unknown"
	}
	return finishNames[f]
}

// Text is a piece of a request's generated text: UTF-8 bytes that alias the
// generator's buffer (see Event). It prints as text: fmt's %v, %s and %q
// and String give the characters, not the byte values, and string(text)
// copies it. Printing allocates the copy; the loop itself never does.
type Text []byte

// String returns the text as a string (a copy, which outlives the event).
func (t Text) String() string { return string(t) }

// Event is one step of one request, or the end of a request.
//
// The slices Text and Top alias buffers of the generator: they are valid
// until the iteration resumes, and a consumer that keeps them must copy
// them (ev.Text.String(), or append(dst, ev.Text...)). This is what makes
// streaming free of allocations.
type Event struct {
	// Request is the index of the request in the slice given to Stream
	// (0 in the events of an Engine's Task).
	Request int
	// Token is the new token, or -1 when the event only ends the request.
	Token int32
	// Text is the new text of the request: the token's bytes, held back while
	// they end inside a UTF-8 character, and all remaining bytes on the
	// request's last event. Empty without a Tokenizer. fmt.Print(ev.Text)
	// prints it as text.
	Text Text
	// Logprob is the token's log-probability (Request.Logprobs).
	Logprob float32
	// Top lists the most probable tokens of the step, most probable first,
	// equal log-probabilities by lower token id (Request.TopLogprobs).
	Top []TokenLogprob
	// Drafted is, for a speculating request, the number of candidates
	// verified in the step that gave the token (see Speculation).
	Drafted int
	// Accepted is set when the token is a candidate the target accepted.
	Accepted bool
	// Finish is set on the request's last event.
	Finish FinishReason
	// StopString is the stop string that ended the request (FinishStop).
	StopString string
	// Err explains FinishError, a FinishContextFull that came from a prompt
	// too long for its slot (ErrPromptTooLong) or from an Eval that found
	// the backend full (backend.ErrContextFull), and FinishCancelled: it is
	// then the context's error, ctx.Err().
	Err error
}

// Result is the whole output of one request.
type Result struct {
	// Tokens are the generated tokens, the final EOS token included.
	Tokens []int32
	// Text is the decoded text of Tokens (empty without a Tokenizer).
	Text string
	// Logprobs holds one log-probability per token (Request.Logprobs).
	Logprobs []float32
	// TopLogprobs holds the alternatives of each token
	// (Request.TopLogprobs).
	TopLogprobs [][]TokenLogprob
	// Finish, StopString and Err are those of the request's last event. The
	// text before the stop string is Text[:strings.Index(Text, StopString)].
	Finish     FinishReason
	StopString string
	Err        error
	// Speculation counts the request's speculation (its Steps count the
	// tokens of a request that does not speculate).
	Speculation SpeculationStats
}

// Generator runs the decoding loop on a Backend. It keeps its buffers from
// one call to the next, so a long-lived Generator allocates nothing per
// token. A Generator is not safe for concurrent use, and neither is its
// backend: one Stream or Generate at a time.
type Generator struct {
	backend backend.Backend
	enc     backend.Encoder // the backend when it is an encoder-decoder, or nil
	tok     backend.Tokenizer
	vocab   int
	busy    bool

	defaultConfig *genconfig.Config
	pool          []*seq // requests of earlier calls, for reuse
	free          []int  // free slots, a stack
	active        []*seq // requests holding a slot, in admission order
	feeds         []backend.Feed
	fedSeqs       []*seq // fedSeqs[i] is the request of feeds[i]
	admitted      []*seq // requests admitted this step whose encoder input waits
	encFeeds      []backend.EncoderFeed
	chunk         int          // most prompt tokens per step; 0: no limit
	stats         *engineStats // an Engine's counters, or nil
	logprobs      []float32
	best          numeric.Best[float32] // scratch: a token's top alternatives

	all       backend.AllLogits  // the backend when it keeps every position's logits, or nil
	draft     *speculative.Draft // the draft model, or nil
	verifying bool               // the step's feeds hold candidates: EvalAll
	props     []*speculative.Proposal
	hists     []*logits.History
	limits    []int
	probs     []float32 // scratch: the target's probabilities at a candidate
}

// NewGenerator returns a generator over backend. tok may be nil: requests
// then need token prompts, and events carry no text.
func NewGenerator(b backend.Backend, tok backend.Tokenizer) *Generator {
	enc, _ := b.(backend.Encoder)
	all, _ := b.(backend.AllLogits)
	return &Generator{backend: b, enc: enc, all: all, tok: tok, vocab: b.VocabSize()}
}

// Stream generates every request and yields, per step, one event for each
// request that took a step, then a final event per request (usually the event
// of its last token). Events of one step come in the order of the requests'
// admission into the batch, which is the order of reqs.
//
// Invalid requests are reported before anything runs, as a single error. A
// backend failure is reported as an error after the events before it; the
// stream then ends and every slot it used is cleared. Cancellation follows
// the contract of package backend: within one step (inside a long prompt
// evaluation when the backend honours ctx) each unfinished request ends with
// FinishCancelled and Err ctx.Err(), and the stream yields no error.
// Stopping the iteration early abandons the requests and clears their slots.
func (g *Generator) Stream(ctx context.Context, reqs []Request) iter.Seq2[Event, error] {
	return g.stream(ctx, reqs, nil)
}

// stream is Stream, and Resume when states (one per request, nil for a
// request that starts afresh) is not nil.
func (g *Generator) stream(ctx context.Context, reqs []Request, states []*RequestState) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		if g.busy {
			yield(Event{}, ErrBusy)
			return
		}
		if g.backend.Slots() < 1 {
			yield(Event{}, errors.New("generation: the backend has no slot"))
			return
		}
		g.busy = true
		defer func() { g.busy = false }()
		seqs, err := g.prepare(reqs)
		if err != nil {
			yield(Event{}, err)
			return
		}
		defer g.release(seqs)
		for i, st := range states {
			if st == nil {
				continue
			}
			if err := g.restore(seqs[i], st); err != nil {
				yield(Event{}, fmt.Errorf("generation: request %d: resume: %w", i, err))
				return
			}
		}
		q := sliceQueue(seqs)
		err = g.run(ctx, &q, func(_ *seq, ev Event) bool { return yield(ev, nil) })
		if err != nil {
			yield(Event{}, err)
		}
	}
}

// Generate runs Stream to the end and gathers each request's output. On a
// backend failure it returns the outputs so far with the error.
func (g *Generator) Generate(ctx context.Context, reqs []Request) ([]Result, error) {
	results := make([]Result, len(reqs))
	texts := make([][]byte, len(reqs))
	for ev, err := range g.Stream(ctx, reqs) {
		if err != nil {
			return results, err
		}
		results[ev.Request].add(&reqs[ev.Request], ev, &texts[ev.Request])
	}
	for i := range results {
		results[i].Text = string(texts[i])
	}
	return results, nil
}

// add gathers ev, an event of req, into res, and its text into text.
func (res *Result) add(req *Request, ev Event, text *[]byte) {
	*text = append(*text, ev.Text...)
	res.Speculation.Add(ev)
	if ev.Token >= 0 {
		res.Tokens = append(res.Tokens, ev.Token)
		if req.Logprobs {
			res.Logprobs = append(res.Logprobs, ev.Logprob)
		}
		if req.TopLogprobs > 0 {
			res.TopLogprobs = append(res.TopLogprobs, append([]TokenLogprob(nil), ev.Top...))
		}
	}
	if ev.Finish != NotFinished {
		res.Finish, res.StopString, res.Err = ev.Finish, ev.StopString, ev.Err
	}
}
