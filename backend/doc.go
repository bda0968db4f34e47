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
// # Errors
//
// [ErrTokenOutOfRange] and [ErrContextFull] are defined here, once, because
// every implementation raises them and the packages above act on them:
// errors.Is finds them through every layer's wrapping.
package backend
