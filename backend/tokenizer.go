package backend

// Tokenizer turns text into tokens and tokens into bytes with a model's
// rules. llamabackend.Tokenizer implements it on a llama.cpp vocabulary.
type Tokenizer interface {
	// Tokenize returns the tokens of text. addSpecial adds the model's BOS
	// (and EOS) tokens where it wants them; parseSpecial reads the text of
	// special tokens, such as "<|eot_id|>", as those tokens.
	Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error)
	// AppendPiece appends the bytes of token to dst, which may be part of a
	// UTF-8 sequence. Special (control) tokens have bytes only when special
	// is true.
	AppendPiece(dst []byte, token int32, special bool) ([]byte, error)
	// IsEOG reports whether token ends generation (EOS, EOT, ...).
	IsEOG(token int32) bool
	// EOGTokens lists every end-of-generation token.
	EOGTokens() []int32
	// AddsBOS reports whether Tokenize with addSpecial prepends a BOS token.
	AddsBOS() bool
}

// ChatTemplater is implemented by a Tokenizer whose model has a chat
// template. It is a separate interface, found by a type assertion, because
// many models have no template.
type ChatTemplater interface {
	// ApplyChatTemplate renders messages as prompt text; addAssistant ends
	// it with the opening of an assistant message.
	ApplyChatTemplate(messages []Message, addAssistant bool) (string, error)
}

// ChatTokenizer is implemented by a Tokenizer that tokenizes chats itself,
// keeping the texts of the messages as text: only the markers the chat
// template writes around them become control tokens, so that a message
// cannot open a turn of another role.
type ChatTokenizer interface {
	// TokenizeChat tokenizes the text render writes with contents (the
	// messages' texts), adding no special tokens; render must write the
	// same text around any contents. With parseSpecial, control-token
	// text inside the contents becomes those tokens too.
	TokenizeChat(render func(contents []string) (string, error), contents []string, parseSpecial bool) ([]int32, error)
}

// Message is one message of a chat prompt.
type Message struct {
	Role    string // "system", "user", "assistant", ...
	Content string
}

// EndOfGeneration is an optional interface of a Backend whose model knows
// its end-of-generation tokens (llamabackend.Backend: the model's EOS, EOT,
// ...). beam.Search takes them as eos_token_id when its config has none, as
// the decoding loop of package generation takes its Tokenizer's.
type EndOfGeneration interface {
	// EOGTokens lists every end-of-generation token of the backend's model.
	EOGTokens() []int32
}
