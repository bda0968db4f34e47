// Package beam finds high-probability continuations of prompts by beam search.
//
// The search is written once over a [backend.Backend] and talks to it only
// through Eval, Logits, Copy, Clear, Room and Slots. Every live beam owns a
// backend slot (a llama.cpp sequence, or a token history in memory). A prompt
// is evaluated once, into one slot; after each step the slots follow the
// chosen parents:
//
//   - a parent without a surviving child is cleared at once, and its slot
//     returns to the prompt's pool;
//   - the first child of each parent inherits the parent's slot (no copy);
//   - every other child takes a free slot and Copy(free, parent's slot).
//
// Free slots never hold a history that a child still needs, so no parent is
// overwritten before it is copied, whatever the order of the copies. Finished
// hypotheses never occupy a slot: their last token is never evaluated. With
// llama.cpp's unified KV cache a copy shares cells instead of duplicating them.
//
// # Slots
//
// A prompt needs NumBeams slots for its whole search. A search runs
// min(len(prompts), Slots()/NumBeams) prompts at a time, admitting the next
// prompt when one finishes, so the backend needs at least NumBeams slots;
// len(prompts)*NumBeams slots search every prompt at once. On llama.cpp a
// slot is a sequence id: n_seq_max >= NumBeams (times the prompts to run at
// once), and a unified KV cache (kv_unified), in which a copy shares the
// parent's cells instead of copying whole streams at the next decode. Its
// cells then hold each prompt once plus at most NumBeams new cells per step
// (pruned beams free theirs at once): n_ctx >= the sum over the prompts run
// at once of len(prompt) + NumBeams*max_new_tokens always suffices. Every
// slot the search used is cleared when it returns, with or without an
// error.
//
// # Rules
//
// [Transformers] (the default) reproduces transformers 4.57's generate():
// _beam_search for num_beams > 1 (beam sampling with do_sample), and _sample
// (greedy or multinomial sampling) for num_beams == 1. [Narrowing] is the
// textbook beam search, in which finished hypotheses keep their place and the
// beam narrows; with one beam it is greedy decoding.
package beam

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/logits"
)

// Rule chooses how candidates are ranked, finished and returned.
type Rule int

const (
	// Transformers is transformers 4.57's generate(): for NumBeams > 1 its
	// _beam_search (log-softmax, the processors on log-probabilities, the
	// best max(2, 1+len(eos))*NumBeams candidates of all beams, only the
	// first NumBeams of them may finish, length penalty over the generated
	// length including eos, early_stopping true, false or "never"); for
	// NumBeams == 1 its _sample (processors on the raw logits, then argmax,
	// or a multinomial draw with DoSample). Where torch leaves the order of
	// equal candidates unspecified, the lower flat index beam*V+token ranks
	// first; a NaN candidate, which torch ranks first, is never chosen.
	Transformers Rule = iota

	// Narrowing is the textbook beam search: each step ranks the
	// k*V extensions of the k live hypotheses by summed log-probability and
	// keeps the first NumBeams-finished finite ones (ties to the lower beam,
	// then the lower token id). A kept candidate ending in eos finishes and
	// keeps its place, so the beam narrows. After the last allowed token the
	// live hypotheses are returned unfinished. Results are ranked by
	// logprob / len^LengthPenalty, len counting eos. The processors of the
	// config, if any, apply to the log-probabilities as in Transformers;
	// DoSample is not allowed. With NumBeams == 1 it is greedy decoding.
	Narrowing
)

// String returns the rule's name.
func (r Rule) String() string {
	switch r {
	case Transformers:
		return "transformers"
	case Narrowing:
		return "narrowing"
	}
	return "Rule(?)"
}

// Options configure a search.
type Options struct {
	// Rule is the search rule; the zero value is Transformers.
	Rule Rule

	// Config holds the decoding fields: NumBeams, LengthPenalty,
	// EarlyStopping, NumReturnSequences, MaxNewTokens or MaxLength (resolved
	// per prompt, as generate() does), EOSTokenID, PadTokenID, DoSample, and
	// every field that enables a logits processor. nil means
	// genconfig.Default(). The search does not modify it. A config without
	// eos_token_id (nil; an empty list means none) on a backend that knows
	// its model's end-of-generation tokens (backend.EndOfGeneration, as
	// llamabackend.Backend does) searches with those, as package generation
	// does with its Tokenizer's; otherwise no token ends a hypothesis and
	// every one runs to the length limit.
	Config *genconfig.Config

	// User processors run after the config's processors and before the
	// sampling warpers, as a logits_processor argument of generate() does.
	// They run on several goroutines at once: a large step (beams ×
	// vocabulary of at least 2^15, with GOMAXPROCS above 1) processes its
	// rows in parallel, so Process is called concurrently for different
	// rows, and must be safe for that (see logits.Processor for exactly
	// what is required). Progress, by contrast, is called on the search's
	// goroutine.
	User []logits.Processor

	// PromptEmbeddings, when not nil, holds per prompt nil or one entry
	// per prompt token, as generation.Request.PromptEmbeddings: a non-nil
	// entry is an input embedding (an image's, a sound's) evaluated in
	// place of that token, which stays as its placeholder for the
	// processors. It needs a backend implementing backend.EmbeddingInput,
	// which checks the values. The search reads it during the call only.
	PromptEmbeddings [][][]float32

	// PromptPositions, when not nil, holds per prompt nil or one entry
	// per prompt token, as generation.Request.PromptPositions: the
	// multi-position RoPE (M-RoPE) position of each, which an M-RoPE
	// model's PromptEmbeddings need (llamacpp.Prompt.Positions makes them).
	// The generated tokens continue after the prompt's largest position:
	// the backend (a backend.PositionInput) keeps each slot's next
	// position, and Copy copies it with the history. The search reads it
	// during the call only.
	PromptPositions [][]backend.Pos

	// Seed seeds the search's logits.Source, the draws of DoSample; the same
	// seed and inputs give the same result. With one beam the search ends
	// its chain in the config's logits.Chooser, as the decoding loop does,
	// so it draws the tokens that generation draws for a request with the
	// same config and Seed. Beam sampling takes one exponential variate per
	// candidate from the same Source (logits.Source.ExpFloat64).
	Seed uint64

	// OutputScores keeps every step's processed scores in Result.Scores
	// (transformers' output_scores). It allocates a row per beam per step.
	OutputScores bool

	// Progress, when set, is called after every step of every prompt with
	// the best hypothesis so far. Beam search cannot stream tokens (a later
	// step can replace any of them), so this is its only progress report.
	Progress func(Progress)
}

// Progress reports the state of one prompt's search after one step.
type Progress struct {
	Prompt int // index of the prompt in the Search call
	Step   int // tokens generated so far

	// Tokens are the generated tokens of the best hypothesis so far, eos
	// included if it finished. The slice is only valid during the callback.
	Tokens []int32

	// Score is the hypothesis's length-normalised score: its summed step
	// scores divided by len(Tokens)^LengthPenalty (greedy and sampling: the
	// summed log-probabilities).
	Score float64

	// Finished is true when the hypothesis ended with an eos token (a live
	// beam, or one cut by the length limit, is not finished).
	Finished bool
}

// Hypothesis is one result of a search.
type Hypothesis struct {
	// Tokens are the generated tokens, eos included; the prompt is not.
	Tokens []int32

	// LogProb is the sum of the step scores along the path. Beam search:
	// the processed log-probabilities (with the default config, the model's
	// log-probabilities); for Transformers the float32 running sum that
	// transformers ranks by. Greedy and sampling (Transformers, one beam):
	// the log-softmax of the processed logits at each chosen token.
	LogProb float64

	// Score is what results are ranked by: LogProb / len(Tokens)^LengthPenalty
	// for beam search (float32 arithmetic under Transformers, as
	// sequences_scores), LogProb for greedy and sampling.
	Score float64

	// Finished is true when the hypothesis ended with an eos token, false
	// when it was cut by the length limit or by an interruption.
	Finished bool

	// Partial is true for a beam that was still live when the search of
	// its prompt was interrupted (see Result.Interrupted): its tokens are a
	// prefix of what the search might have returned, and its Score is its
	// length-normalised LogProb so far.
	Partial bool
}

// Result holds the outcome of a search.
type Result struct {
	// Hypotheses holds, per prompt, the returned hypotheses, best first:
	// NumReturnSequences of them under Transformers, every finished and
	// length-cut hypothesis (at most NumBeams) under Narrowing. A prompt
	// whose search was interrupted (Interrupted) holds what it had found
	// so far, ranked by score, as many at most: the hypotheses that had
	// finished, and the live beams, marked Partial. A prompt whose search
	// had not started, or had not generated a token, has none.
	Hypotheses [][]Hypothesis

	// Interrupted is set, per prompt, when Search returned early (a
	// cancelled context, or ErrNoRoom) while the prompt's search was under
	// way; nil when the search ran to its end.
	Interrupted []bool

	// Scores, with Options.OutputScores, holds per step t and row
	// prompt*NumBeams+beam (live beams in rank order) the processed scores
	// the step ranked, without the beam's running score; rows of prompts
	// no longer searched at step t, and of beams a narrowed beam no longer
	// has, are nil. At a prompt's first step every beam row of the
	// Transformers rule holds the prompt's row, as in transformers.
	Scores [][][]float32

	// Stats counts the work of the search.
	Stats Stats

	// The fields below are generate()'s other outputs, set by the
	// Transformers rule (nil under Narrowing, and after a cancellation).
	// Entry i of each is return sequence i%R of prompt i/R, R =
	// NumReturnSequences. Sequences[i] holds the prompt followed by the
	// generated tokens; sequences shorter than the longest are padded as
	// transformers pads them: with pad_token_id, except that beam search
	// pads with eos[0] when pad_token_id is 0 or unset and with -1 when
	// there is no eos.
	Sequences [][]int32

	// SequencesScores are the hypotheses' scores (nil for one beam).
	SequencesScores []float32

	// BeamIndices holds, per sequence and generated token, the flat index
	// prompt*NumBeams+beam of the beam the token was appended to, and -1
	// past the end (nil for one beam).
	BeamIndices [][]int32

	// TransitionScores are compute_transition_scores(sequences, scores,
	// beam_indices) of transformers: per generated token, its processed score
	// at its step (beam search: log-probability without the beam's running
	// score; greedy and sampling: processed logit), and 0 past the end.
	// (transformers keeps evaluating finished greedy sequences and reports the
	// pad token's score there; this search stops evaluating them.)
	TransitionScores [][]float32
}

// Stats counts a search's work.
type Stats struct {
	Evals   int           // Backend.Eval calls
	Tokens  int           // tokens fed to the backend, prompts included
	Copies  int           // Backend.Copy calls made by reordering
	Clears  int           // Backend.Clear calls
	Encodes int           // Encoder.Encode calls, one per prompt on an encoder-decoder backend
	Reorder time.Duration // time spent reordering slots and processor histories
}

// Errors that callers may test for with errors.Is.
var (
	// ErrInvalid reports a bad parameter: options, config or prompts.
	ErrInvalid = errors.New("beam: invalid input")

	// ErrTooFewSlots reports a backend with fewer slots than NumBeams.
	ErrTooFewSlots = errors.New("beam: backend has too few slots")

	// ErrNoFiniteScore reports a step in which no candidate has a finite
	// score (every token masked, or NaN logits).
	ErrNoFiniteScore = errors.New("beam: no finite score")

	// ErrBadLogits reports a backend logits row of the wrong width.
	ErrBadLogits = errors.New("beam: logits row of the wrong width")

	// ErrNoRoom reports a slot that cannot take the next tokens, or an Eval
	// that failed with backend.ErrContextFull (slots that share a full
	// store, such as llama.cpp's unified KV cache). It interrupts the
	// search: Search returns the hypotheses found so far with it.
	ErrNoRoom = errors.New("beam: backend slot full")
)

// neg is transformers' placeholder score for impossible beams and rejected
// hypotheses (exactly representable in float32).
const neg float32 = -1e9

// Search searches continuations of each prompt on backend. prompts must be
// non-empty token sequences within the backend's vocabulary. The backend's
// slots must be free for the search's use: it clears a prompt's first slot
// before evaluating the prompt and overwrites the others by Copy. On an
// encoder-decoder backend (backend.Encoder) the prompts are the encoder
// inputs, and each decoder starts from decoder_start_token_id (see
// encoder.go).
//
// On error no result is returned and every slot the search used is cleared,
// so the backend stays usable, except for the two interruptions, after
// which the hypotheses found so far are returned with the error.
// Cancellation follows the contract of package backend: within one step of
// ctx's end Search clears its slots and returns ctx.Err() with a Result
// whose Hypotheses hold every prompt whose search had completed and, for
// the prompts under way (Result.Interrupted), the hypotheses found so far;
// its Stats and Scores cover the steps run; its generate() outputs
// (Sequences and the rest) are nil. A full context (a slot without room for
// the next tokens, or an Eval failing with backend.ErrContextFull)
// interrupts the search the same way, with an error wrapping ErrNoRoom.
func Search(ctx context.Context, backend backend.Backend, prompts [][]int32, opts Options) (*Result, error) {
	s, err := newSearch(ctx, backend, prompts, opts)
	if err != nil {
		return nil, err
	}
	res, err := s.run()
	if cerr := s.releaseAll(); cerr != nil {
		return nil, errors.Join(err, cerr)
	}
	if err != nil && res == nil {
		return nil, err
	}
	return res, err
}

func finite(x float32) bool { return !math.IsInf(float64(x), 0) && x == x }
