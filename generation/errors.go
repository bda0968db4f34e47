package generation

import "errors"

// Errors that callers may test for with errors.Is.
var (
	// ErrEmptyPrompt reports an empty prompt for a model that adds no BOS
	// token (or a generator without a Tokenizer).
	ErrEmptyPrompt = errors.New("empty prompt")
	// ErrPromptTooLong reports a prompt that does not fit in a backend slot;
	// its request ends with FinishContextFull and no token.
	ErrPromptTooLong = errors.New("prompt longer than the context")
	// ErrNoTokenizer reports a request that needs a Tokenizer (text, chat
	// or stop strings) on a generator without one.
	ErrNoTokenizer = errors.New("no tokenizer")
	// ErrBusy reports a Stream or Generate call while another one of the
	// same Generator runs.
	ErrBusy = errors.New("generator busy")
)
