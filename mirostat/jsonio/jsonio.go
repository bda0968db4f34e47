package jsonio

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/llamaloop/llamaloop/mirostat"
)

// Config is mirostat.Config on the wire.
type Config struct {
	Version int     `json:"version"`
	Tau     float64 `json:"tau"`
	Eta     float64 `json:"eta"`
	Mu      float64 `json:"mu,omitempty"`
	M       int     `json:"m,omitempty"`
}

func (c Config) lib() mirostat.Config {
	return mirostat.Config{Version: mirostat.Version(c.Version), Tau: c.Tau, Eta: c.Eta, Mu: c.Mu, M: c.M}
}

func wireConfig(c mirostat.Config) Config {
	return Config{Version: int(c.Version), Tau: c.Tau, Eta: c.Eta, Mu: c.Mu, M: c.M}
}

// State is a session's feedback state on the wire.
type State struct {
	Mu    float64 `json:"mu"`
	Steps int     `json:"steps"`
}

// Step is mirostat.Step on the wire.
type Step struct {
	Token    int32   `json:"token"`
	Prob     float64 `json:"prob"`
	Surprise float64 `json:"surprise"`
	Kept     int     `json:"kept"`
	K        int     `json:"k"`
	MuBefore float64 `json:"mu_before"`
	Mu       float64 `json:"mu"`
	S        float64 `json:"s"`
}

// Logits is a row of logits on the wire: a JSON array of numbers, where
// null masks a token (JSON has no -Infinity). Numbers must fit a float32.
type Logits []float32

// UnmarshalJSON parses an array of numbers and nulls.
func (l *Logits) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		*l = nil
		return nil
	}
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return errors.New("logits must be an array")
	}
	body := bytes.TrimSpace(b[1 : len(b)-1])
	out := (*l)[:0]
	if len(body) == 0 {
		*l = out
		return nil
	}
	// The decoder has checked the syntax, so commas separate elements
	// unless an element is a string, array or object: rejected first.
	for i := 0; len(body) > 0; i++ {
		tok := body
		if j := bytes.IndexByte(body, ','); j >= 0 {
			tok, body = body[:j], body[j+1:]
		} else {
			body = nil
		}
		tok = bytes.TrimSpace(tok)
		switch {
		case string(tok) == "null":
			out = append(out, float32(math.Inf(-1)))
			continue
		case len(tok) == 0 || (tok[0] != '-' && (tok[0] < '0' || tok[0] > '9')):
			return fmt.Errorf("logit %d must be a number or null", i)
		}
		x, err := strconv.ParseFloat(string(tok), 32)
		if err != nil {
			return fmt.Errorf("logit %d: %s does not fit a float32", i, tok)
		}
		out = append(out, float32(x))
	}
	*l = out
	return nil
}

// MarshalJSON writes masked tokens as null.
func (l Logits) MarshalJSON() ([]byte, error) {
	if l == nil {
		return []byte("null"), nil
	}
	b := []byte{'['}
	for i, x := range l {
		if i > 0 {
			b = append(b, ',')
		}
		if math.IsInf(float64(x), -1) {
			b = append(b, "null"...)
			continue
		}
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 1) {
			return nil, fmt.Errorf("logit %d is %v, which JSON cannot carry", i, x)
		}
		b = strconv.AppendFloat(b, float64(x), 'g', -1, 32)
	}
	return append(b, ']'), nil
}

// InitRequest asks for a session's initial state.
type InitRequest struct {
	Op     string `json:"op,omitempty"` // "init" for Handle; ignored otherwise
	Config Config `json:"config"`
}

// InitResponse holds the configuration with defaults applied and the
// initial state.
type InitResponse struct {
	Config Config `json:"config"`
	State  State  `json:"state"`
}

// StepRequest is one step of one session: its configuration, its state
// before the step (absent: the initial state), a row of logits and a
// uniform draw in [0, 1).
type StepRequest struct {
	Op      string  `json:"op,omitempty"` // "step" for Handle; ignored otherwise
	Config  Config  `json:"config"`
	State   *State  `json:"state,omitempty"`
	Logits  Logits  `json:"logits"`
	Uniform float64 `json:"uniform"`
}

// StepResponse is the step and the state after it.
type StepResponse struct {
	Step  Step  `json:"step"`
	State State `json:"state"`
}

// BatchRequest steps several independent sessions at once.
type BatchRequest struct {
	Op       string        `json:"op,omitempty"` // "batch" for Handle; ignored otherwise
	Sessions []StepRequest `json:"sessions"`
}

// BatchResponse holds one result per session, in order.
type BatchResponse struct {
	Results []StepResponse `json:"results"`
}

// WeightsRequest is StepRequest for a row of non-negative weights.
type WeightsRequest struct {
	Op      string    `json:"op,omitempty"` // "weights" for Handle; ignored otherwise
	Config  Config    `json:"config"`
	State   *State    `json:"state,omitempty"`
	Weights []float64 `json:"weights"`
	Uniform float64   `json:"uniform"`
}

// PreviewRequest inspects a session's next candidate set: exactly one of
// Logits and Weights. With Candidates set, the response lists them.
type PreviewRequest struct {
	Op         string    `json:"op,omitempty"` // "preview" for Handle; ignored otherwise
	Config     Config    `json:"config"`
	State      *State    `json:"state,omitempty"`
	Logits     Logits    `json:"logits,omitempty"`
	Weights    []float64 `json:"weights,omitempty"`
	Candidates bool      `json:"candidates,omitempty"`
}

// Preview is mirostat.Preview on the wire.
type Preview struct {
	Vocabulary       int     `json:"vocabulary"`
	Kept             int     `json:"kept"`
	K                int     `json:"k"`
	RetainedMass     float64 `json:"retained_mass"`
	ExpectedSurprise float64 `json:"expected_surprise"`
	Mu               float64 `json:"mu"`
}

// Candidates is mirostat.Candidates on the wire.
type Candidates struct {
	Tokens       []int32   `json:"tokens"`
	Original     []float64 `json:"original"`
	Renormalized []float64 `json:"renormalized"`
}

// PreviewResponse describes the candidate set; Candidates only on request.
type PreviewResponse struct {
	Preview    Preview     `json:"preview"`
	Candidates *Candidates `json:"candidates,omitempty"`
}

// Error is a failure on the wire. Code is one of bad_request, empty_row,
// all_masked, non_finite_logit, invalid_uniform, invalid_probability,
// invalid_parameter, numerical_failure. Index names the entry of the row,
// Session the session of a batch, when they apply.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Index   *int   `json:"index,omitempty"`
	Session *int   `json:"session,omitempty"`
}

// ErrorResponse carries an Error.
type ErrorResponse struct {
	Error Error `json:"error"`
}

// ErrBadRequest wraps a request that is not valid JSON for its operation.
var ErrBadRequest = errors.New("jsonio: bad request")

// WireError converts an error returned by this package into its wire form.
func WireError(err error) Error {
	e := Error{Code: "bad_request", Message: err.Error()}
	for _, c := range []struct {
		err  error
		code string
	}{
		{mirostat.ErrEmptyRow, "empty_row"},
		{mirostat.ErrAllMasked, "all_masked"},
		{mirostat.ErrNonFiniteLogit, "non_finite_logit"},
		{mirostat.ErrInvalidUniform, "invalid_uniform"},
		{mirostat.ErrInvalidProbability, "invalid_probability"},
		{mirostat.ErrInvalidParameter, "invalid_parameter"},
		{mirostat.ErrNumerical, "numerical_failure"},
	} {
		if errors.Is(err, c.err) {
			e.Code = c.code
			break
		}
	}
	var ie *mirostat.IndexError
	if errors.As(err, &ie) {
		e.Index = &ie.Index
	}
	var re *mirostat.RowError
	if errors.As(err, &re) {
		e.Session = &re.Row
	}
	return e
}

// HandleInit answers an InitRequest.
func HandleInit(request []byte) ([]byte, error) {
	var req InitRequest
	if err := decode(request, &req); err != nil {
		return nil, err
	}
	s, err := mirostat.New(req.Config.lib())
	if err != nil {
		return nil, err
	}
	return json.Marshal(InitResponse{Config: wireConfig(s.Config()), State: wireState(s.State())})
}

// HandleStep answers a StepRequest.
func HandleStep(request []byte) ([]byte, error) {
	var req StepRequest
	if err := decode(request, &req); err != nil {
		return nil, err
	}
	s, err := session(req.Config, req.State)
	if err != nil {
		return nil, err
	}
	st, err := s.SampleLogits(req.Logits, req.Uniform)
	if err != nil {
		return nil, err
	}
	return json.Marshal(StepResponse{Step: wireStep(st), State: wireState(s.State())})
}

// HandleWeights answers a WeightsRequest.
func HandleWeights(request []byte) ([]byte, error) {
	var req WeightsRequest
	if err := decode(request, &req); err != nil {
		return nil, err
	}
	s, err := session(req.Config, req.State)
	if err != nil {
		return nil, err
	}
	st, err := s.SampleWeights(req.Weights, req.Uniform)
	if err != nil {
		return nil, err
	}
	return json.Marshal(StepResponse{Step: wireStep(st), State: wireState(s.State())})
}

// HandleBatch answers a BatchRequest, all or nothing: when a session fails, the
// error (a *mirostat.RowError naming it) is the only answer.
func HandleBatch(request []byte) ([]byte, error) {
	var req BatchRequest
	if err := decode(request, &req); err != nil {
		return nil, err
	}
	samplers := make([]*mirostat.Sampler, len(req.Sessions))
	rows := make([][]float32, len(req.Sessions))
	uniforms := make([]float64, len(req.Sessions))
	for i, sr := range req.Sessions {
		s, err := session(sr.Config, sr.State)
		if err != nil {
			return nil, &mirostat.RowError{Row: i, Err: err}
		}
		samplers[i], rows[i], uniforms[i] = s, sr.Logits, sr.Uniform
	}
	steps, err := mirostat.SampleBatchAtomic(nil, samplers, rows, uniforms)
	if err != nil {
		return nil, err
	}
	resp := BatchResponse{Results: make([]StepResponse, len(steps))}
	for i, st := range steps {
		resp.Results[i] = StepResponse{Step: wireStep(st), State: wireState(samplers[i].State())}
	}
	return json.Marshal(resp)
}

// HandlePreview answers a PreviewRequest.
func HandlePreview(request []byte) ([]byte, error) {
	var req PreviewRequest
	if err := decode(request, &req); err != nil {
		return nil, err
	}
	var row mirostat.Row
	switch {
	case req.Logits != nil && req.Weights == nil:
		row = mirostat.Logits(req.Logits)
	case req.Weights != nil && req.Logits == nil:
		row = mirostat.Weights(req.Weights)
	default:
		return nil, fmt.Errorf("%w: exactly one of logits and weights", ErrBadRequest)
	}
	s, err := session(req.Config, req.State)
	if err != nil {
		return nil, err
	}
	p, err := s.Preview(row)
	if err != nil {
		return nil, err
	}
	resp := PreviewResponse{Preview: Preview(p)}
	if req.Candidates {
		c, err := s.Candidates(row)
		if err != nil {
			return nil, err
		}
		resp.Candidates = &Candidates{Tokens: c.Tokens, Original: c.Original, Renormalized: c.Renormalized}
	}
	return json.Marshal(resp)
}

// Handle dispatches a request whose "op" field names the operation (init,
// step, batch, preview, weights) and whose other fields are that
// operation's request. It always answers JSON: the operation's response, or
// an ErrorResponse.
func Handle(request []byte) []byte {
	var env struct {
		Op string `json:"op"`
	}
	var resp []byte
	err := json.Unmarshal(request, &env)
	if err == nil {
		op, ok := ops[env.Op]
		if !ok {
			err = fmt.Errorf("%w: unknown op %q", ErrBadRequest, env.Op)
		} else {
			resp, err = op(request)
		}
	} else {
		err = fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	if err != nil {
		resp, _ = json.Marshal(ErrorResponse{Error: WireError(err)})
	}
	return resp
}

var ops = map[string]func([]byte) ([]byte, error){
	"init": HandleInit, "step": HandleStep, "batch": HandleBatch, "preview": HandlePreview, "weights": HandleWeights,
}

// decode parses one JSON value strictly: unknown fields and trailing data
// are errors.
func decode(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	if d.More() {
		return fmt.Errorf("%w: data after the request", ErrBadRequest)
	}
	return nil
}

func session(c Config, st *State) (*mirostat.Sampler, error) {
	if st == nil {
		return mirostat.New(c.lib())
	}
	return mirostat.NewFromState(c.lib(), mirostat.State{Mu: st.Mu, Steps: st.Steps})
}

func wireState(st mirostat.State) State { return State{Mu: st.Mu, Steps: st.Steps} }

func wireStep(st mirostat.Step) Step {
	return Step{Token: st.Token, Prob: st.Prob, Surprise: st.Surprise, Kept: st.Kept, K: st.K,
		MuBefore: st.MuBefore, Mu: st.Mu, S: st.S}
}
