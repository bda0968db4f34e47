package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/cli"
)

// chatCells is the default cache size of a conversation, when the model
// was trained on at least that many positions.
const chatCells = 4096

// chat reads user turns from stdin, one per line, and answers each with
// the model's chat template applied to the whole conversation. On a
// terminal it prompts with "> " on stderr. Ctrl-C during an answer ends
// the answer; Ctrl-C while waiting for a turn, or the end of stdin, ends
// the conversation.
func (s *session) chat() error {
	if s.cfg.NumBeams > 1 {
		return cli.Usagef("--chat without a prompt does not combine with --num-beams")
	}
	cells := s.o.ctx
	if cells == 0 {
		cells = min(chatCells, max(s.model.Info().CtxTrain, 256))
	}
	lb, err := s.newBackend(1, cells, false)
	if err != nil {
		return err
	}
	defer closeBackend(lb)
	gen := generation.NewGenerator(lb, s.tok)

	lines := make(chan string)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(s.stdin)
		sc.Buffer(make([]byte, 64*1024), 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		readErr <- sc.Err()
		close(lines)
	}()

	var msgs []backend.Message
	if s.o.system != "" {
		msgs = append(msgs, backend.Message{Role: "system", Content: s.o.system})
	}
	for turn := 0; ; {
		if s.stdinTerminal {
			fmt.Fprint(s.stderr, "> ")
		}
		var line string
		select {
		case l, ok := <-lines:
			if !ok {
				if s.stdinTerminal {
					fmt.Fprintln(s.stderr)
				}
				return <-readErr
			}
			line = l
		case <-s.interrupts:
			fmt.Fprintln(s.stderr)
			return context.Canceled
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		msgs = append(msgs, backend.Message{Role: "user", Content: line})
		reply, err := s.chatTurn(gen, msgs, turn)
		if err != nil {
			return err
		}
		msgs = append(msgs, backend.Message{Role: "assistant", Content: reply})
		turn++
	}
}

// chatTurn generates the answer to the conversation msgs and returns its
// text, without the stop string that ended it.
func (s *session) chatTurn(gen *generation.Generator, msgs []backend.Message, turn int) (string, error) {
	req := generation.Request{Messages: msgs}
	toks, err := s.tokenize(&req)
	if err != nil {
		return "", err
	}
	cfg := s.cfg
	req = generation.Request{Prompt: toks, Config: cfg, Seed: s.seed + uint64(turn), StopStrings: cfg.StopStrings,
		Logprobs: s.o.logprobs > 0, TopLogprobs: s.o.logprobs, Processors: s.procs, TrimLeadingSpace: s.o.trimLeadingSpace}
	if s.o.mirostat != 0 {
		req.Mirostat = s.o.mirostatConfig()
	}
	r := &row{index: turn, promptIndex: turn, sequences: 1, prompt: prompt{Messages: msgs[len(msgs)-1:]}, promptTokens: len(toks)}
	ctx, stopWatching := s.untilInterrupt()
	p := s.newPrinter(false)
	st, err := s.stream(ctx, gen, []generation.Request{req}, []*row{r}, 1, p)
	stopWatching()
	interrupted := ctx.Err() != nil
	p.close()
	note := ""
	if interrupted {
		note = "interrupted"
	}
	s.summary(st, note)
	if err != nil && !(interrupted && errors.Is(err, context.Canceled)) {
		return "", err
	}
	reply := string(r.text)
	if r.stopString != "" {
		if i := strings.Index(reply, r.stopString); i >= 0 {
			reply = reply[:i]
		}
	}
	return reply, nil
}
