// Package grammar constrains generation to a formal language: GBNF grammars as llama.cpp defines
// them, and JSON Schema through a conversion to GBNF, in pure Go.
//
// # Pieces
//
// [Parse] compiles GBNF text into a [Grammar] whose rules work on bytes: a character class
// becomes the alternatives of its UTF-8 encodings, so a token may end in the middle of a
// multi-byte character and a token may span several grammar elements. Token references,
// <[id]> and !<[id]>, are elements that take one whole token by its id (as llama.cpp's; a token
// that reaches one partway through its bytes is refused). A [Vocabulary] holds every
// token's bytes and a prefix trie of them; build it once per model ([VocabularyFrom] reads a
// backend.Tokenizer or a llamacpp *Vocab, [NewVocabulary] takes plain byte strings). A [Matcher]
// pairs the two, and [Processor] is the stateful logits processor that masks a sequence's row.
//
// # How a mask is computed
//
// The matcher follows llama.cpp's pushdown matcher (sets of stacks of grammar positions,
// expanded until a byte is on top), but interns each set of stacks as a state of an automaton
// over bytes built lazily: the transition of a state on a byte is computed once, then looked
// up. A state's mask walks the vocabulary trie in preorder and skips a whole subtree as soon as
// a byte leads to the dead state, so tokens sharing a prefix share its work; the mask is then
// kept per state. After warm-up, a step costs one look-up per accepted byte and the writing of
// -inf into the row. Left recursion is rejected when parsing, because the expansion would not end.
//
// # Bounds
//
// A set of stacks is a node of a hash-consed graph (entries of a top position over the node of
// the stacks below it), so stacks that differ below a shared top are held once: an ambiguous
// grammar whose stacks double with every byte (x ::= "a" x "b"? | "a" x "c"? | "a") keeps a set
// that grows by a few entries per byte, not twice over. Whatever the grammar, every call of a
// [Matcher] is bounded by its [Options]: StepWork bounds the work of one token accepted or one
// mask computed (default [DefaultStepWork], a second or two at worst), MaxBytes the memory of
// the automaton and the kept masks together (default [DefaultMaxBytes]). A sequence whose grammar
// needs more gets a failed state: its mask allows nothing, and [Matcher.Err], [Matcher.Apply]
// and [Processor.Err] return an error wrapping [ErrBudget], which package generation reports as
// the request's FinishError.
//
// # JSON Schema
//
// [FromJSONSchema] converts a schema to a grammar that enforces every keyword of it, or refuses
// the schema with a [SchemaError] naming the JSON path and the keyword: each keyword acts on its
// own type only, keywords beside allOf, $ref, anyOf and oneOf are intersected into one schema,
// oneOf is kept only where its branches are provably disjoint, and patterns have ECMA-262's
// meaning. A document the grammar accepts is valid under the schema; the grammar accepts a subset
// of the valid documents (one key order, one spelling of each string, bounded whitespace). The
// vendored JSON-Schema-Test-Suite and an independent validator check both in the tests.
//
// # End of generation
//
// The end-of-generation tokens are allowed exactly when the tokens accepted so far form a
// complete sentence. A sequence forced out of the grammar (by a processor that forces a token)
// reaches the dead state, where only end of generation is allowed.
package grammar
