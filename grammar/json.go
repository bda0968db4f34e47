package grammar

// jsonPrimitives are the rules every JSON grammar here shares, those of llama.cpp's
// json-schema-to-grammar: strings without control characters (nor DEL), integers of at most 16
// digits, and whitespace of one space or one newline with up to 20 blanks between tokens, so that
// a model cannot wander off into endless digits or blank lines.
const jsonPrimitives = `space ::= | " " | "\n" [ \t]{0,20}
char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
string ::= "\"" char* "\"" space
integral-part ::= [0] | [1-9] [0-9]{0,15}
decimal-part ::= [0-9]{1,16}
number ::= ("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space
integer ::= ("-"? integral-part) space
boolean ::= ("true" | "false") space
null ::= "null" space
value ::= object | array | string | number | boolean | null
object ::= "{" space ( string ":" space value ("," space string ":" space value)* )? "}" space
array ::= "[" space ( value ("," space value)* )? "]" space
`

// JSONGrammarText is the GBNF of any JSON value (the --json mode of llamagen), llama.cpp's
// json.gbnf with the primitives above.
const JSONGrammarText = "root ::= value\n" + jsonPrimitives

// JSON returns the grammar of any JSON value ([JSONGrammarText]).
func JSON() *Grammar {
	g, err := Parse(JSONGrammarText)
	if err != nil {
		panic(err) // a constant that the tests parse
	}
	return g
}
