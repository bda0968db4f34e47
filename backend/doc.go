// Package backend is the contract between llamaloop's decoding code and the
// thing that evaluates a model, in the spirit of database/sql/driver: the
// decoding loop (package generation) and beam search (package beam) are
// written once against it, in pure Go, and an implementation plugs a model
// in underneath.
//
//   - [Backend] evaluates token histories held in numbered slots and exposes
//     the next-token logits after each evaluation; [Feed] is one slot's input
//     to an evaluation.
//   - [Tokenizer] turns text into tokens and tokens into bytes;
//     [ChatTemplater], implemented by a tokenizer whose model has a chat
//     template, renders [Message] values as a prompt.
//   - [AllLogits] is an optional interface of a Backend that can keep the
//     logits after every token of a feed ([AllLogits.EvalAll]): speculative
//     decoding (package generation) verifies a whole draft with one
//     evaluation through it. MemoryBackend, llamabackend and
//     prefixcache implement it.
//   - [PrefixLookup] is an optional interface of a Backend that reuses
//     evaluated prompt prefixes (prefixcache): generation asks it how much
//     of a prompt it holds.
//   - [Encoder] is an optional interface of a Backend whose model is an
//     encoder-decoder (T5): it runs a request's encoder input once and
//     attaches the output to the request's slots; [EncoderFeed] is one such
//     input. generation and beam use it when the backend has it.
//     llamabackend.EncoderDecoder and internal/testkit/refbackend's T5 implement it.
//   - [EmbeddingInput] is an optional interface of a Backend that evaluates
//     input embeddings in place of tokens ([Feed].Embd, checked by
//     [CheckEmbd]): llamabackend and the float64 reference backend
//     implement it; package generation refuses a request with embeddings
//     on a backend without it. prefixcache implements it over a backend
//     that does.
//   - [PositionInput] is an optional interface of a Backend that evaluates
//     inputs at given positions ([Feed].Pos, [Pos], checked by
//     [CheckPositions]; [SlotPositions] keeps them per slot): what a model
//     with multi-position RoPE (Qwen2-VL) needs for an image's embeddings.
//     llamabackend and the float64 reference backend implement it; the
//     MemoryBackend refuses positions.
//   - [NonCausalInput] is an optional interface of an EmbeddingInput
//     that evaluates runs of embeddings with causal attention off
//     ([Feed].NonCausal, checked by [CheckNonCausal]): a Gemma 3 image, as
//     llama.cpp's mtmd helper decodes it. llamabackend and the reference
//     backend implement it.
//   - [MemoryBackend] is an exact in-memory Backend over a [ModelFunc] (a
//     table or a function): the backend of the loop's and the search's tests,
//     of the transformers parity replays and of benchmarks of the loop
//     itself.
//
// Package llamacpp/llamabackend implements Backend and Tokenizer on
// llama.cpp (a slot is a llama.cpp sequence); it is the only part of the
// stack above llamacpp that needs cgo. This package, generation, beam,
// logits and mirostat build with CGO_ENABLED=0.
//
// # Cancellation
//
// Every long-running call of llamaloop takes a context.Context and follows
// one contract: generation's Generator.Stream and Generate, beam.Search, and
// and mirostat's Sampler.Stream and Generate.
//
//   - It checks ctx before every step (one token of every request, one step
//     of every beam search, one model call) and passes ctx to Backend.Eval,
//     which honours it within a long evaluation. Once ctx is done, the call
//     stops within one step.
//   - A cancellation is not a failure: whatever the call completed before it
//     is returned, as on a normal end, and the cancellation is reported as
//     ctx.Err() itself, unwrapped (context.Canceled or
//     context.DeadlineExceeded), never as a backend error that wraps it.
//   - It leaves nothing behind: every backend slot it used is cleared and
//     none of its goroutines outlives it.
//
// Where each call reports it:
//
//   - generation: each unfinished request's last event has Finish
//     FinishCancelled and Err ctx.Err(), as every other way a request ends is
//     reported on its last event; the stream itself yields no error, and
//     Generate returns the requests' results with a nil error.
//   - beam.Search returns ctx.Err() with a Result that holds the hypotheses
//     of every prompt whose search had completed, and for each prompt under
//     way (Result.Interrupted) the hypotheses found so far, its live beams
//     marked Partial (none for prompts not yet started).
//   - mirostat's Stream yields (Step{}, ctx.Err()) last; its Generate
//     returns the tokens drawn so far with ctx.Err(). The steps already
//     yielded stay committed to the sampler.
//
// # Errors
//
// [ErrTokenOutOfRange] and [ErrContextFull] are defined here, once, because
// every implementation raises them and the packages above act on them:
// errors.Is finds them through every layer's wrapping.
package backend
