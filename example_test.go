package llamaloop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/llamaloop/llamaloop"
	"github.com/llamaloop/llamaloop/embedding"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/llamacpp"
)

// The examples run in a directory that holds model.gguf, the project's demo
// model (a Markov chain over English words, written by TestMain), and a
// generation_config.json.

// Stream text with a model's generation_config.json (here greedy, 16 new
// tokens).
func Example() {
	m, err := llamaloop.Open("model.gguf", llamaloop.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	opts := llamaloop.GenerateOptions{ConfigFile: "generation_config.json"}
	for text, err := range m.Stream(context.Background(), "The model", opts) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print(text)
	}
	fmt.Println()
	// Output:
	//  reads a prompt and returns new logits for every token. The model reads a prompt
}

// Generate with a config built in Go: the result holds the text, the tokens
// and why generation stopped.
func ExampleModel_Generate() {
	m, err := llamaloop.Open("model.gguf", llamaloop.Options{Context: llamacpp.ContextParams{Threads: 1}})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	cfg := genconfig.Default()
	cfg.MaxNewTokens = new(40)
	res, err := m.Generate(context.Background(), "Beam search", llamaloop.GenerateOptions{Config: cfg, StopStrings: []string{"."}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q: %d tokens, %s\n", res.Text, len(res.Tokens), res.Finish)
	// Output:
	// " and returns new logits for every token.": 8 tokens, stop
}

// Sample with a seed: the same seed gives the same text.
func ExampleModel_Generate_sampling() {
	m, err := llamaloop.Open("model.gguf", llamaloop.Options{Context: llamacpp.ContextParams{Threads: 1}})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	cfg := genconfig.Default()
	if err := cfg.Update([]byte(`{"do_sample": true, "temperature": 0.8, "top_p": 0.95, "max_new_tokens": 12}`)); err != nil {
		log.Fatal(err)
	}
	a, err := m.Generate(context.Background(), "The model", llamaloop.GenerateOptions{Config: cfg, Seed: 7})
	if err != nil {
		log.Fatal(err)
	}
	b, err := m.Generate(context.Background(), "The model", llamaloop.GenerateOptions{Config: cfg, Seed: 7})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(a.Text == b.Text)
	// Output:
	// true
}

// Beam search with 4 beams: every hypothesis, best first, with its score.
func ExampleModel_Beam() {
	m, err := llamaloop.Open("model.gguf", llamaloop.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	hyps, err := m.Beam(context.Background(), "The model", 4, llamaloop.GenerateOptions{MaxNewTokens: 24})
	if err != nil {
		log.Fatal(err)
	}
	for _, h := range hyps {
		fmt.Printf("%.2f %q\n", h.Score, h.Text)
	}
	// Output:
	// -1.04 " more certain, and returns an error says what each new logits for every token, and returns new logits for every token."
	// -1.06 " more certain, and returns an error says what each new logits for every token, and returns new logits for every token is"
	// -1.06 " more certain, and returns an error says what each new logits for every token."
	// -1.07 " more certain, and returns new logits for every token."
}

// A chat answer constrained by a JSON Schema: the answer is a JSON document
// valid under the schema.
func ExampleModel_Chat() {
	m, err := llamaloop.Open("model.gguf", llamaloop.Options{Context: llamacpp.ContextParams{Threads: 1}})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	schema := `{"type": "object", "properties": {"answer": {"type": "string", "maxLength": 30}}, "required": ["answer"]}`
	msgs := []llamaloop.Message{{Role: "user", Content: "What does the model read?"}}
	res, err := m.Chat(context.Background(), msgs, llamaloop.GenerateOptions{JSONSchema: schema, MaxNewTokens: 200})
	if err != nil {
		log.Fatal(err)
	}
	var answer struct{ Answer string }
	if err := json.Unmarshal([]byte(res.Text), &answer); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q (%s)\n", answer.Answer, res.Finish)
	// Output:
	// " the model reads a prompt and," (eos)
}

// A GBNF grammar (llama.cpp's format) constrains the text the same way.
func ExampleModel_Stream() {
	m, err := llamaloop.Open("model.gguf", llamaloop.Options{Context: llamacpp.ContextParams{Threads: 1}})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	opts := llamaloop.GenerateOptions{Grammar: `root ::= (" yes" | " no") "."`, MaxNewTokens: 8}
	for text, err := range m.Stream(context.Background(), "Is the model small?", opts) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print(text)
	}
	fmt.Println()
	// Output:
	//  no.
}

// Embeddings need a model opened with an embeddings context; here the demo
// model, whose token vectors are averaged (mean pooling).
func ExampleModel_Embed() {
	m, err := llamaloop.Open("model.gguf", llamaloop.Options{
		Context: llamacpp.ContextParams{Embeddings: true, Pooling: embedding.PoolingMean},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	vecs, err := m.Embed(context.Background(), "The model reads a prompt.", "Beam search")
	if err != nil {
		log.Fatal(err)
	}
	var dot float32
	for i := range vecs[0] {
		dot += vecs[0][i] * vecs[0][i]
	}
	fmt.Printf("%d vectors of %d, length %.3f\n", len(vecs), len(vecs[0]), dot)
	// Output:
	// 2 vectors of 384, length 1.000
}

// The objects under a Model are the lower packages' own: here its
// generation.Generator decodes two prompts in one batch (the context holds
// two sequences), with log-probabilities.
func ExampleModel_Generator() {
	m, err := llamaloop.Open("model.gguf", llamaloop.Options{Context: llamacpp.ContextParams{Sequences: 2, Threads: 1}})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	cfg := genconfig.Default()
	cfg.MaxNewTokens = new(4)
	reqs := []generation.Request{
		{Text: "The model", Config: cfg, Logprobs: true},
		{Text: "Beam search", Config: cfg, Logprobs: true},
	}
	res, err := m.Generator().Generate(context.Background(), reqs)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range res {
		fmt.Printf("%q %d log-probabilities\n", r.Text, len(r.Logprobs))
	}
	// Output:
	// " reads a prompt and" 4 log-probabilities
	// " and returns new logits" 4 log-probabilities
}
