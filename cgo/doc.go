// Package cgo is llamaloop's raw binding to llama.cpp: the only package that
// imports "C". It is not the package to program against: for the common
// cases (open a model, generate, stream, chat, beam search, constrained
// output, embeddings) import the module's root package,
// github.com/llamaloop/llamaloop, and for full control over models,
// contexts, batches and the KV cache, package llamacpp.
//
// It holds one small Go function per C call and no policy: no
// validation, no lifetimes, no errors beyond the C return values. Misuse of
// many of these functions aborts the whole process (llama.cpp asserts on a
// token id outside the vocabulary, a sequence id beyond n_seq_max, a batch
// larger than n_batch); package llamacpp validates every argument before it
// reaches C.
//
// One file per feature: process (logging, initialisation, C memory),
// devices, model, context, memory (the KV cache), batch, vocab, sampler
// (llama.cpp's own samplers, for benchmarks).
//
// Two engines, chosen at build time. By default llama.cpp and ggml's CPU
// backend are compiled by plain cgo from the Go module
// github.com/ollama/ollama (pinned in go.mod; link_module.go); the include
// paths come from CGO_CPPFLAGS, which the project's Makefile sets (`make env`
// prints them for builds outside the Makefile). With the build tag
// llamacpp_external (`make LLAMA_CPP=DIR`) the same files are compiled
// against the headers of a llama.cpp installed with CMake into DIR and linked
// with its libraries (link_external.go); build/llama-probe.sh checks that
// install and chooses, in compat.h, between the C API generations llamaloop
// knows.
package cgo
