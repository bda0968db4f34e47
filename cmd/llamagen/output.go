package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/llamacpp"
)

// printer writes generated output to stdout.
type printer interface {
	// token reports a new token of r (already appended to r).
	token(r *row, ev *generation.Event)
	// finish reports that r ended.
	finish(r *row)
	// close ends the output.
	close()
}

func (s *session) newPrinter(multi bool) printer {
	if s.o.json {
		return newJSONPrinter(s.stdout, s.model.Vocab(), s.o.logprobs > 0)
	}
	return &textPrinter{w: s.stdout, vocab: s.model.Vocab(), multi: multi, echo: s.o.echo, logprobs: s.o.logprobs}
}

// tokenJSON is the "token" object of --json.
type tokenJSON struct {
	Type    string    `json:"type"`
	Row     int       `json:"row"`
	Token   int32     `json:"token"`
	Text    string    `json:"text"`
	Logprob *float32  `json:"logprob,omitempty"`
	Top     []topJSON `json:"top,omitempty"`
}

type topJSON struct {
	Token   int32   `json:"token"`
	Text    string  `json:"text"`
	Logprob float32 `json:"logprob"`
}

// resultJSON is the "result" object of --json.
type resultJSON struct {
	Type         string   `json:"type"`
	Row          int      `json:"row"`
	PromptIndex  int      `json:"prompt_index"`
	Sequence     int      `json:"sequence"`
	Method       string   `json:"method,omitempty"`
	Prompt       string   `json:"prompt"`
	PromptTokens int      `json:"prompt_tokens"`
	Text         string   `json:"text"`
	Tokens       []int32  `json:"tokens"`
	Finish       string   `json:"finish"`
	StopString   string   `json:"stop_string,omitempty"`
	Score        *float64 `json:"score,omitempty"`
	Error        string   `json:"error,omitempty"`
}

// textJSON is the "text" object of --json: the bytes a row's output ended
// with after its last token event (the first bytes of a character that
// the output ended in the middle of), so that the texts of a row's token
// and text objects join up to its result's text.
type textJSON struct {
	Type string `json:"type"`
	Row  int    `json:"row"`
	Text string `json:"text"`
}

// jsonPrinter writes --json. Texts are written as encoding/json writes a
// string with invalid UTF-8, one U+FFFD per byte that is not part of a
// character, in the events as in the result (an event never ends inside a
// character, see generation.Event.Text), as llamaserve's stream does.
type jsonPrinter struct {
	enc      *json.Encoder
	vocab    *llamacpp.Vocab
	logprobs bool
	sent     map[int]int // bytes of a row's text in its token objects
}

func newJSONPrinter(w io.Writer, v *llamacpp.Vocab, logprobs bool) *jsonPrinter {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &jsonPrinter{enc: enc, vocab: v, logprobs: logprobs, sent: map[int]int{}}
}

func (p *jsonPrinter) token(r *row, ev *generation.Event) {
	p.sent[r.index] += len(ev.Text)
	t := tokenJSON{Type: "token", Row: r.index, Token: ev.Token, Text: string(ev.Text)}
	if p.logprobs {
		lp := ev.Logprob
		t.Logprob = &lp
		for _, alt := range ev.Top {
			t.Top = append(t.Top, topJSON{alt.Token, piece(p.vocab, alt.Token), alt.Logprob})
		}
	}
	p.enc.Encode(t)
}

func (p *jsonPrinter) finish(r *row) {
	if sent, ok := p.sent[r.index]; ok && sent < len(r.text) {
		p.enc.Encode(textJSON{Type: "text", Row: r.index, Text: string(r.text[sent:])})
	}
	res := resultJSON{Type: "result", Row: r.index, PromptIndex: r.promptIndex, Sequence: r.sequence, Method: r.method,
		Prompt: r.prompt.label(), PromptTokens: r.promptTokens, Text: string(r.text), Tokens: r.tokens,
		Finish: r.finish, StopString: r.stopString, Score: r.score}
	if r.prompt.Text != "" {
		res.Prompt = r.prompt.Text
	}
	if res.Tokens == nil {
		res.Tokens = []int32{}
	}
	if r.err != nil {
		res.Error = r.err.Error()
	}
	p.enc.Encode(res)
}

func (p *jsonPrinter) close() {}

// piece is a token's text, control tokens rendered, invalid UTF-8 as
// replacement characters (JSON strings hold text).
func piece(v *llamacpp.Vocab, t int32) string {
	b, _ := v.AppendPiece(nil, t, true)
	return string(bytes.ToValidUTF8(b, []byte("\uFFFD")))
}

// textPrinter writes plain text. One row streams as it is generated;
// several rows are printed whole, labelled, in row order as they finish.
// With --logprobs every token gets a line of its own.
type textPrinter struct {
	w        io.Writer
	vocab    *llamacpp.Vocab
	multi    bool
	echo     bool
	logprobs int

	started bool
	wrote   bool
	printed int                   // bytes of the row's text written (one row)
	lines   map[int]*bytes.Buffer // logprob lines per row (several rows)
	done    map[int]*row
	next    int // next row to print (several rows)
	lastNL  bool
}

func (p *textPrinter) token(r *row, ev *generation.Event) {
	if p.multi {
		if p.logprobs > 0 {
			if p.lines == nil {
				p.lines = map[int]*bytes.Buffer{}
			}
			if p.lines[r.index] == nil {
				p.lines[r.index] = new(bytes.Buffer)
			}
			p.writeLogprob(p.lines[r.index], ev)
		}
		return
	}
	p.start(r)
	if p.logprobs > 0 {
		var b bytes.Buffer
		p.writeLogprob(&b, ev)
		p.write(b.Bytes())
		return
	}
	p.write(r.text[p.printed:])
	p.printed = len(r.text)
}

// start echoes the prompt before the first output of a single row.
func (p *textPrinter) start(r *row) {
	if !p.started {
		p.started = true
		if p.echo {
			p.write([]byte(r.prompt.Text))
		}
	}
}

// writeLogprob writes one token line: its text, log-probability and the
// most probable alternatives.
func (p *textPrinter) writeLogprob(b *bytes.Buffer, ev *generation.Event) {
	fmt.Fprintf(b, "%-16s %9.4f", strconv.Quote(piece(p.vocab, ev.Token)), ev.Logprob)
	for i, alt := range ev.Top {
		sep := "  |"
		if i > 0 {
			sep = ","
		}
		fmt.Fprintf(b, "%s %s %.4f", sep, strconv.Quote(piece(p.vocab, alt.Token)), alt.Logprob)
	}
	b.WriteByte('\n')
}

func (p *textPrinter) write(b []byte) {
	if len(b) == 0 {
		return
	}
	p.w.Write(b)
	p.wrote = true
	p.lastNL = b[len(b)-1] == '\n'
}

func (p *textPrinter) finish(r *row) {
	if !p.multi {
		p.start(r)
		if p.logprobs == 0 {
			// the last event may carry the held-back bytes of a character
			p.write(r.text[p.printed:])
			p.printed = len(r.text)
		}
		return
	}
	if p.done == nil {
		p.done = map[int]*row{}
	}
	p.done[r.index] = r
	for {
		d, ok := p.done[p.next]
		if !ok {
			return
		}
		delete(p.done, p.next)
		p.printRow(d)
		p.next++
	}
}

func (p *textPrinter) printRow(r *row) {
	head := fmt.Sprintf("[%d] %s", r.promptIndex+1, r.prompt.label())
	if r.sequences > 1 {
		head = fmt.Sprintf("[%d.%d] %s", r.promptIndex+1, r.sequence+1, r.prompt.label())
	}
	if r.score != nil {
		head += fmt.Sprintf("  (score %.4f)", *r.score)
	}
	if r.method != "" {
		head = r.method
	}
	fmt.Fprintf(p.w, "%s\n", head)
	if p.logprobs > 0 {
		if b := p.lines[r.index]; b != nil {
			p.w.Write(b.Bytes())
		}
	} else {
		text := r.text
		if p.echo {
			text = append([]byte(r.prompt.Text), text...)
		}
		p.w.Write(text)
		if len(text) == 0 || text[len(text)-1] != '\n' {
			fmt.Fprintln(p.w)
		}
	}
	fmt.Fprintf(p.w, "[%s]\n\n", finishNote(r))
	p.lastNL = true
}

func finishNote(r *row) string {
	s := fmt.Sprintf("%d tokens, %s", len(r.tokens), r.finish)
	if r.stopString != "" {
		s += fmt.Sprintf(" %q", r.stopString)
	}
	return s
}

func (p *textPrinter) close() {
	if !p.multi && p.wrote && !p.lastNL {
		fmt.Fprintln(p.w)
	}
}
