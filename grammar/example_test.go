package grammar_test

import (
	"fmt"
	"math"

	"github.com/llamaloop/llamaloop/grammar"
)

// show prints the tokens of v that state s allows.
func show(m *grammar.Matcher, v *grammar.Vocabulary, s grammar.State) {
	var names []string
	for _, t := range m.Allowed(nil, s) {
		if v.IsEOG(t) {
			names = append(names, "<eos>")
		} else {
			names = append(names, fmt.Sprintf("%q", v.Token(t)))
		}
	}
	fmt.Println(names)
}

// A GBNF grammar over a toy vocabulary: the matcher lists the tokens each
// state allows, and Apply masks a row of scores to them (what
// grammar.Processor does to each step's logits in package generation or
// beam: pass it as a user processor). End of generation is allowed once
// the text is a complete sentence of the grammar.
func Example() {
	vocab, err := grammar.NewVocabulary([][]byte{
		[]byte(""), []byte("yes"), []byte("no"), []byte("maybe"), []byte("."), []byte("ye"), []byte("s."),
	}, []int32{0}) // token 0 is end of generation
	if err != nil {
		fmt.Println(err)
		return
	}
	g, err := grammar.Parse(`root ::= ("yes" | "no") "."`)
	if err != nil {
		fmt.Println(err)
		return
	}
	m := grammar.NewMatcher(g, vocab)
	s := m.Start()
	show(m, vocab, s)

	scores := []float32{1, 2, 3, 4, 5, 6, 7}
	if err := m.Apply(s, scores); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(scores[1], scores[3], math.IsInf(float64(scores[3]), -1))

	s = m.Accept(s, 5) // "ye"
	show(m, vocab, s)
	s = m.Accept(s, 6) // "s."
	show(m, vocab, s)
	fmt.Println(m.Complete(s))
	// Output:
	// ["yes" "no" "ye"]
	// 2 -Inf true
	// ["s."]
	// [<eos>]
	// true
}

// A JSON Schema becomes a grammar (FromJSONSchema, or its GBNF text with
// SchemaToGBNF); a schema keyword the conversion cannot enforce is refused
// with an error naming its JSON path.
func Example_jsonSchema() {
	schema := []byte(`{"type": "object", "properties": {"answer": {"enum": ["yes", "no"]}}, "required": ["answer"]}`)
	g, err := grammar.FromJSONSchema(schema)
	if err != nil {
		fmt.Println(err)
		return
	}
	vocab, err := grammar.NewVocabulary([][]byte{
		[]byte(""), []byte(`{"answer":`), []byte(` `), []byte(`"yes"`), []byte(`"no"`), []byte(`"maybe"`), []byte(`}`),
	}, []int32{0})
	if err != nil {
		fmt.Println(err)
		return
	}
	m := grammar.NewMatcher(g, vocab)
	s := m.Start()
	show(m, vocab, s)
	s = m.Accept(s, 1)
	show(m, vocab, s)
	s = m.Accept(s, 3)
	show(m, vocab, s)
	s = m.Accept(s, 6)
	show(m, vocab, s)

	_, err = grammar.FromJSONSchema([]byte(`{"type": "object", "properties": {"n": {"not": {"type": "string"}}}}`))
	fmt.Println(err)
	// Output:
	// ["{\"answer\":"]
	// [" " "\"yes\"" "\"no\""]
	// [" " "}"]
	// [<eos> " "]
	// json schema at /properties/n: keyword "not" is not supported (the grammar cannot express it)
}
