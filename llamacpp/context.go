package llamacpp

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/llamaloop/llamaloop/cgo"
	"github.com/llamaloop/llamaloop/embedding"
	"github.com/llamaloop/llamaloop/internal/testhook"
)

// MaxThreads is the most threads a context may use (GGML_MAX_N_THREADS).
const MaxThreads = 512

// FlashAttention selects llama.cpp's flash-attention mode.
type FlashAttention int

// Flash-attention modes; the zero value lets llama.cpp decide per device.
const (
	FlashAttentionAuto FlashAttention = iota
	FlashAttentionOff
	FlashAttentionOn
)

// String is the mode's name: auto, off or on.
func (f FlashAttention) String() string {
	switch f {
	case FlashAttentionAuto:
		return "auto"
	case FlashAttentionOff:
		return "off"
	case FlashAttentionOn:
		return "on"
	}
	return fmt.Sprintf("FlashAttention(%d)", int(f))
}

// KVType is the element type of the KV cache.
type KVType string

// KV cache element types: the ones llama-bench's -ctk and -ctv accept, and
// f32. A quantized V cache requires flash attention (on or auto).
const (
	KVDefault KVType = ""
	KVF32     KVType = "f32"
	KVF16     KVType = "f16"
	KVBF16    KVType = "bf16"
	KVQ8_0    KVType = "q8_0"
	KVQ4_0    KVType = "q4_0"
	KVQ4_1    KVType = "q4_1"
	KVQ5_0    KVType = "q5_0"
	KVQ5_1    KVType = "q5_1"
	KVIQ4_NL  KVType = "iq4_nl"
)

// kvTypes maps each KV type to its ggml_type and the size of one element in
// thirty-seconds of a byte (the quantized types store blocks of 32).
var kvTypes = map[KVType]struct{ ggml, size int32 }{
	KVF32: {0, 32 * 4}, KVF16: {1, 32 * 2}, KVQ4_0: {2, 18}, KVQ4_1: {3, 20}, KVQ5_0: {6, 22},
	KVQ5_1: {7, 24}, KVQ8_0: {8, 34}, KVIQ4_NL: {20, 18}, KVBF16: {30, 32 * 2},
}

// KVTypes lists the KV cache element types NewContext accepts.
func KVTypes() []KVType {
	return []KVType{KVF32, KVF16, KVBF16, KVQ8_0, KVQ4_0, KVQ4_1, KVQ5_0, KVQ5_1, KVIQ4_NL}
}

// Quantized reports whether t stores blocks of quantized values (a V cache
// of such a type needs flash attention).
func (t KVType) Quantized() bool {
	switch t {
	case KVDefault, KVF32, KVF16, KVBF16:
		return false
	}
	return true
}

func (t KVType) ggml() (int32, error) {
	if t == KVDefault {
		return -1, nil
	}
	if k, ok := kvTypes[t]; ok {
		return k.ggml, nil
	}
	names := make([]string, 0, len(kvTypes))
	for _, k := range KVTypes() {
		names = append(names, string(k))
	}
	return 0, invalid("KV cache type %q (want one of %s)", string(t), strings.Join(names, ", "))
}

// ContextParams configure NewContext. Zero fields take the defaults noted.
type ContextParams struct {
	// ContextSize is the number of KV cells (default 512; llama.cpp rounds it
	// up to a multiple of 256). Read the effective value with Context.Size.
	ContextSize int
	// BatchSize is the most tokens one Decode may carry (default 512).
	BatchSize int
	// MicroBatchSize is the physical batch (default: BatchSize).
	MicroBatchSize int
	// Sequences is n_seq_max, the number of sequence ids 0..Sequences-1
	// (default 1, at most MaxSequences()).
	Sequences int
	// Threads decode single tokens and BatchThreads multi-token batches
	// (default: the number of CPUs, BatchThreads defaults to Threads). The
	// context keeps a ggml thread pool of that size for its lifetime; more
	// threads than CPUs cost a warning, because ggml's workers spin while
	// they wait for each other and slow down sharply without a core each.
	Threads, BatchThreads int
	// Poll is how long the thread pool's workers spin waiting for the next
	// graph before they sleep, as ggml's polling level: 0 means ggml's
	// default (50: up to 1024*128*50 pause instructions, tens of ms, after
	// every graph), 1 to 100 that level, NoPoll none (they sleep at once and
	// the next graph wakes them). Spinning workers save the wake-up of every
	// decode but keep a core busy between decodes, from the work that runs
	// there (a server's sampling, HTTP and its clients on the same cores).
	Poll int
	// FlashAttention selects flash attention (default auto).
	FlashAttention FlashAttention
	// TypeK and TypeV are the KV cache element types (default f16).
	TypeK, TypeV KVType
	// UnifiedKV makes every sequence share one buffer of ContextSize cells:
	// SeqCopy then shares cells instead of copying them and works on
	// partial ranges, and a token may belong to several sequences. Without
	// it each sequence owns ContextSize/Sequences cells (at least 256).
	UnifiedKV bool
	// Perf enables llama.cpp's timing counters (Context.Perf).
	Perf bool
	// BatchInvariant makes a sequence's logits independent of the other
	// sequences decoded with it, bit for bit on the CPU backend:
	// llamabackend.Backend then shapes every decode so that each row takes
	// the kernels it takes alone (see "Batch-invariant evaluation" there).
	// It needs a KV stream per sequence (UnifiedKV false), where a
	// sequence's cells sit where they would alone; it holds with any cache
	// type and flash attention setting (tested on bench-small, 12 layers,
	// with F16, Q8_0 and Q4_0 weights). It costs one KV cell per sequence,
	// a second row per decoding step and decodes of their own for prompt
	// chunks. Decode itself runs the batches it is given; GPU backends
	// promise nothing.
	BatchInvariant bool
	// Embeddings makes the context compute embeddings besides logits:
	// what Embed, EmbedTokens, SequenceEmbedding and TokenEmbedding read
	// (embeddings.go). A pooled context decodes with MicroBatchSize equal
	// to BatchSize, so that a sequence's pooling sees all of its tokens.
	Embeddings bool
	// Pooling is an Embeddings context's pooling (default: the model's).
	Pooling embedding.Pooling
}

// Context is an evaluation context over a model: its KV cache holds up to
// Sequences() sequences.
//
// A Context is meant for one goroutine at a time, but concurrent calls never
// crash it: every method that reaches llama.cpp's context or the state of
// the last evaluation (Encode, Decode, the logits and embedding reads, Embed
// and EmbedTokens, every KV-cache and sequence-state operation, SetThreads,
// Threads, Perf, ResetPerf and Close) holds the context's lock while it
// runs, so two goroutines that call them at once wait for each other
// instead of corrupting llama.cpp's state or aborting the process. Only the
// sizes fixed at creation (Size, BatchSize, Sequences, ...) are read
// without it. What the lock cannot give is an order: a goroutine's Decode
// followed by its Logits may see another goroutine's Encode or Decode in
// between (the view then fails or holds the other's rows), so callers who
// share a Context order their whole steps themselves.
type Context struct {
	// mu serialises the calls that run llama.cpp over the whole context (see
	// the type's doc: every method touching c or the last evaluation's
	// state takes it; the unexported helpers expect it held); uncontended
	// it costs 18 ns, against 608 µs for a decode of one token of the
	// one-layer test model (BenchmarkDecodeLock, 2-vCPU AMD EPYC).
	mu sync.Mutex

	model   *Model
	c       cgo.Context
	pools   *threadpools
	abort   *int32 // C memory read by llama.cpp's abort callback
	nVocab  int
	nCtx    int
	nCtxSeq int
	nBatch  int
	nUbatch int
	nSeq    int
	unified bool
	// invariant: made with ContextParams.BatchInvariant
	invariant bool
	// pooling of an Embeddings context, resolved by llama.cpp; the zero
	// PoolingModel in a context without embeddings
	pooling embedding.Pooling

	// the Go context whose cancellation currently sets abort; abortMu keeps
	// a late cancellation from writing the flag after Close freed it
	armed     context.Context
	stopArmed func() bool
	abortMu   sync.Mutex
	armedGen  uint64

	cleanup runtime.Cleanup
	native  int64 // bytes accounted in NativeMemory

	// outputs of the last successful Decode: batch index -> logits row
	lastOutputs []int8
	lastN       int

	// encoded[s]: sequence s may attend to the output of the last Encode
	// (encoder-decoder models)
	encoded []bool
}

// ctxResources is what a forgotten Context's cleanup frees.
type ctxResources struct {
	c      cgo.Context
	pools  *threadpools
	abort  *int32
	model  *Model
	native int64
}

// threadpools are the ggml thread pools a context owns. Without them ggml
// starts and joins its worker threads for every graph it computes, which
// cost 2-thread generation about a tenth of its speed (q8_0, measured with
// llamabench). One pool serves both decode kinds when Threads equals
// BatchThreads.
//
// The CPU backend remembers the pool of its last graph and pauses it when
// the next graph runs on another, so a pool replaced by SetThreads may be
// touched by the next decode: it is retired, and freed after a decode that
// succeeded (which switched the backend to the current pools) or after the
// context.
type threadpools struct {
	single, batch cgo.Threadpool
	poll          int // cgo.ThreadpoolNew's poll
	// their worker counts (ggml declares ggml_threadpool_get_n_threads but
	// does not define it)
	nSingle, nBatch int
	retired         []cgo.Threadpool
	// thread runs every evaluation of the context when ggml uses OpenMP
	// (see evalThread); nil otherwise
	thread *evalThread
	// decoded: a decode ran on the current pools since they were attached
	decoded bool
}

// start starts pools of threads and batchThreads workers; the current ones
// are freed now if no decode ran on them, else retired.
func (p *threadpools) start(threads, batchThreads int) {
	single := cgo.ThreadpoolNew(threads, p.poll)
	batch := single
	if batchThreads != threads {
		batch = cgo.ThreadpoolNew(batchThreads, p.poll)
	}
	if !p.single.Nil() {
		p.retire()
	}
	p.single, p.batch, p.nSingle, p.nBatch, p.decoded = single, batch, threads, batchThreads, false
}

// retire frees the current pools if no decode ran on them, else retires
// them.
func (p *threadpools) retire() {
	old := []cgo.Threadpool{p.single}
	if p.batch != p.single {
		old = append(old, p.batch)
	}
	if p.decoded {
		p.retired = append(p.retired, old...)
	} else {
		for _, tp := range old {
			tp.Free()
		}
	}
}

// freeRetired frees the retired pools once a decode has succeeded on the
// current ones.
func (p *threadpools) freeRetired() {
	for _, tp := range p.retired {
		tp.Free()
	}
	p.retired = p.retired[:0]
}

// free frees every pool; the context that used them must be freed first.
func (p *threadpools) free() {
	p.freeRetired()
	p.single.Free()
	if p.batch != p.single {
		p.batch.Free()
	}
	p.single, p.batch = cgo.Threadpool{}, cgo.Threadpool{}
	p.thread.stop()
	p.thread = nil
}

// warnOversubscribed logs one warning line when a thread count exceeds the
// machine's CPUs.
func warnOversubscribed(threads, batchThreads int) {
	if n := runtime.NumCPU(); max(threads, batchThreads) > n {
		slog.Warn(fmt.Sprintf("llamacpp: %d threads on %d CPUs: ggml's workers spin while they wait for each other, "+
			"and without a core each they slow down sharply; use at most %d", max(threads, batchThreads), n, n))
	}
}

// NewContext creates a context. Invalid parameters give ErrInvalidArgument;
// a KV cache or micro-batch buffers that cannot fit in the memory available
// give ErrNoMemory naming ContextSize or BatchSize (checked on the CPU,
// where llamaloop can bound them from below); llama.cpp's own refusals give
// an error with its explanation.
func (m *Model) NewContext(p ContextParams) (*Context, error) {
	cp := cgo.DefaultContextParams()
	set := func(dst *uint32, v int, name string, lo, hi int) error {
		if v == 0 {
			return nil
		}
		if v < lo || v > hi {
			return invalid("%s %d out of range [%d, %d]", name, v, lo, hi)
		}
		*dst = uint32(v)
		return nil
	}
	if err := set(&cp.NCtx, p.ContextSize, "ContextSize", 1, 1<<24); err != nil {
		return nil, err
	}
	if p.ContextSize == 0 {
		cp.NCtx = 512
	}
	cp.NBatch = 512
	if err := set(&cp.NBatch, p.BatchSize, "BatchSize", 1, 1<<20); err != nil {
		return nil, err
	}
	cp.NUbatch = cp.NBatch
	if err := set(&cp.NUbatch, p.MicroBatchSize, "MicroBatchSize", 1, int(cp.NBatch)); err != nil {
		return nil, err
	}
	if bidirectional[m.info.Architecture] && cp.NUbatch < cp.NBatch {
		// llama.cpp asserts that a batch of a model whose attention looks
		// both ways fits one micro-batch.
		return nil, invalid("MicroBatchSize %d below BatchSize %d: model %s (%s) attends both ways, so llama.cpp computes a batch in one micro-batch",
			cp.NUbatch, cp.NBatch, m.path, m.info.Architecture)
	}
	if err := set(&cp.NSeqMax, p.Sequences, "Sequences", 1, MaxSequences()); err != nil {
		return nil, err
	}
	if err := threadParams(p, &cp); err != nil {
		return nil, err
	}
	if p.BatchInvariant && p.UnifiedKV {
		return nil, invalid("BatchInvariant needs a KV stream per sequence (UnifiedKV false): in a unified cache a sequence's cells lie among the others' and its attention rounds by where")
	}
	switch p.FlashAttention {
	case FlashAttentionAuto:
		cp.FlashAttn = -1
	case FlashAttentionOff:
		cp.FlashAttn = 0
	case FlashAttentionOn:
		cp.FlashAttn = 1
	default:
		return nil, invalid("FlashAttention %d", p.FlashAttention)
	}
	var err error
	if cp.TypeK, err = p.TypeK.ggml(); err != nil {
		return nil, err
	}
	if cp.TypeV, err = p.TypeV.ggml(); err != nil {
		return nil, err
	}
	if p.TypeV.Quantized() && p.FlashAttention == FlashAttentionOff {
		return nil, invalid("TypeV %s: a quantized V cache needs flash attention (FlashAttention on or auto)", p.TypeV)
	}
	cp.KVUnified = p.UnifiedKV
	cp.NoPerf = !p.Perf
	if err := m.embeddingParams(p, &cp); err != nil {
		return nil, err
	}

	if m.vocabOnly {
		return nil, invalid("model %s was loaded with VocabOnly and has no weights to evaluate", m.path)
	}
	if reason := m.cannotGenerate(); reason != "" {
		return nil, invalid("model %s: %s", m.path, reason)
	}
	if err := m.checkEncoderParams(p, cp.NSeqMax); err != nil {
		return nil, err
	}
	native, err := m.kv.check(p, cp)
	if err != nil {
		return nil, err
	}
	if err := m.attach(); err != nil {
		return nil, err
	}
	takeLastError()
	c := cgo.InitFromModel(m.c, cp)
	if c.Nil() {
		m.detach()
		detail := takeLastError()
		if detail == "" {
			detail = "llama.cpp refused the parameters"
		}
		return nil, fmt.Errorf("llamacpp: cannot create context: %s", detail)
	}
	nativeAlloc(native)
	warnOversubscribed(int(cp.NThreads), int(cp.NThreadsBatch))
	pools := &threadpools{poll: -1} // ggml's default
	switch {
	case p.Poll == NoPoll:
		pools.poll = 0
	case p.Poll > 0:
		pools.poll = p.Poll
	}
	pools.start(int(cp.NThreads), int(cp.NThreadsBatch))
	c.AttachThreadpool(pools.single, pools.batch)
	if forceEvalThread || cpuUsesOpenMP() {
		pools.thread = startEvalThread(c)
	}
	ctx := &Context{model: m, c: c, pools: pools, nVocab: m.vocab.n, unified: p.UnifiedKV, invariant: p.BatchInvariant,
		nCtx: c.NCtx(), nCtxSeq: c.NCtxSeq(), nBatch: c.NBatch(), nUbatch: c.NUbatch(), nSeq: c.NSeqMax(), native: native}
	if p.Embeddings {
		ctx.pooling = embedding.FromLlama(int32(c.PoolingType()))
	}
	ctx.abort = (*int32)(cgo.CMalloc(4))
	*ctx.abort = 0
	c.SetAbortFlag(ctx.abort)
	ctx.lastOutputs = make([]int8, ctx.nBatch)
	ctx.encoded = make([]bool, ctx.nSeq)
	// A cleanup, not a finalizer: a cancellation callback may point back at
	// the context, and finalizers never run on cycles. Its argument keeps
	// the model alive until the context is freed.
	ctx.cleanup = runtime.AddCleanup(ctx, func(r ctxResources) {
		r.c.Free()
		r.pools.free()
		cgo.CFree(unsafe.Pointer(r.abort))
		nativeFree(r.native)
		r.model.detach()
	}, ctxResources{c: c, pools: pools, abort: ctx.abort, model: m, native: native})
	return ctx, nil
}

// NoPoll is the ContextParams.Poll of workers that sleep as soon as a graph
// is computed.
const NoPoll = -1

// threadParams sets the thread counts of cp from p: Threads (0: every CPU) for single tokens,
// BatchThreads (0: as Threads) for batches.
func threadParams(p ContextParams, cp *cgo.ContextParams) error {
	threads := p.Threads
	if threads < 0 || p.BatchThreads < 0 || threads > MaxThreads || p.BatchThreads > MaxThreads {
		return invalid("thread counts %d, %d outside [0, %d]", threads, p.BatchThreads, MaxThreads)
	}
	if p.Poll < NoPoll || p.Poll > 100 {
		return invalid("poll %d outside [-1, 100]", p.Poll)
	}
	if threads == 0 {
		threads = runtime.NumCPU()
	}
	cp.NThreads = int32(threads)
	cp.NThreadsBatch = int32(threads)
	if p.BatchThreads > 0 {
		cp.NThreadsBatch = int32(p.BatchThreads)
	}
	return nil
}

// Close frees the context; it is idempotent.
func (ctx *Context) Close() error {
	ctx.mu.Lock()
	defer ctx.mu.Unlock()
	if ctx.c.Nil() {
		return nil
	}
	if ctx.stopArmed != nil {
		ctx.stopArmed()
		ctx.stopArmed = nil
	}
	ctx.c.Free()
	ctx.c = cgo.Context{}
	// after llama_free: the context's CPU backend may pause its last pool
	// until then
	ctx.pools.free()
	ctx.abortMu.Lock()
	cgo.CFree(unsafe.Pointer(ctx.abort))
	ctx.abort = nil
	ctx.abortMu.Unlock()
	ctx.cleanup.Stop()
	nativeFree(ctx.native)
	ctx.model.detach()
	return nil
}

func (ctx *Context) check() error {
	if ctx == nil || ctx.c.Nil() {
		return fmt.Errorf("context: %w", ErrClosed)
	}
	return nil
}

// Model is the model the context evaluates.
func (ctx *Context) Model() *Model { return ctx.model }

// Size is the effective number of KV cells (n_ctx).
func (ctx *Context) Size() int { return ctx.nCtx }

// SequenceSize is the number of cells one sequence may use (n_ctx_seq): Size
// with a unified cache, Size/Sequences otherwise.
func (ctx *Context) SequenceSize() int { return ctx.nCtxSeq }

// BatchSize is the most tokens one Decode may carry (n_batch).
func (ctx *Context) BatchSize() int { return ctx.nBatch }

// MicroBatchSize is the most tokens llama.cpp computes at once (n_ubatch):
// a Decode of more is split.
func (ctx *Context) MicroBatchSize() int { return ctx.nUbatch }

// Sequences is n_seq_max: valid sequence ids are 0..Sequences()-1.
func (ctx *Context) Sequences() int { return ctx.nSeq }

// UnifiedKV reports whether sequences share one KV buffer.
func (ctx *Context) UnifiedKV() bool { return ctx.unified }

// BatchInvariant reports whether the context was made with
// ContextParams.BatchInvariant.
func (ctx *Context) BatchInvariant() bool { return ctx.invariant }

// VocabSize is the width of a logits row.
func (ctx *Context) VocabSize() int { return ctx.nVocab }

// SetThreads sets the threads for single-token and multi-token decodes; the
// context's thread pools are replaced by pools of the new sizes.
func (ctx *Context) SetThreads(threads, batchThreads int) error {
	ctx.mu.Lock()
	defer ctx.mu.Unlock()
	if err := ctx.check(); err != nil {
		return err
	}
	if threads < 1 || batchThreads < 1 || threads > MaxThreads || batchThreads > MaxThreads {
		return invalid("threads %d, %d outside [1, %d]", threads, batchThreads, MaxThreads)
	}
	if ctx.c.NThreads() == threads && ctx.c.NThreadsBatch() == batchThreads {
		return nil
	}
	warnOversubscribed(threads, batchThreads)
	ctx.pools.start(threads, batchThreads)
	ctx.c.AttachThreadpool(ctx.pools.single, ctx.pools.batch)
	ctx.c.SetNThreads(threads, batchThreads)
	return nil
}

// Threads returns the threads for single-token and multi-token decodes.
func (ctx *Context) Threads() (threads, batchThreads int) {
	ctx.mu.Lock()
	defer ctx.mu.Unlock()
	if ctx.check() != nil {
		return 0, 0
	}
	return ctx.c.NThreads(), ctx.c.NThreadsBatch()
}

// arm makes the cancellation of gctx abort llama.cpp's computation. The same
// Go context stays armed across calls, so steady-state decodes allocate
// nothing.
func (ctx *Context) arm(gctx context.Context) {
	if gctx == ctx.armed {
		return
	}
	if ctx.stopArmed != nil {
		ctx.stopArmed()
		ctx.stopArmed = nil
	}
	// A cancellation of the previous Go context may still be on its way
	// (AfterFunc runs in its own goroutine): the generation number makes it
	// a no-op once another context is armed.
	ctx.abortMu.Lock()
	ctx.armed = gctx
	ctx.armedGen++
	gen := ctx.armedGen
	atomic.StoreInt32(ctx.abort, 0)
	ctx.abortMu.Unlock()
	if gctx.Done() != nil {
		ctx.stopArmed = context.AfterFunc(gctx, func() {
			ctx.abortMu.Lock()
			if ctx.abort != nil && ctx.armedGen == gen {
				atomic.StoreInt32(ctx.abort, 1)
			}
			ctx.abortMu.Unlock()
		})
	}
}

// Decode evaluates the batch. Its cancellation reaches llama.cpp through the
// abort callback (the CPU backend checks it between graph nodes). Errors:
// ErrInvalidArgument for a batch that fails validation (nothing evaluated),
// ErrContextFull, ErrAborted, ErrInvalidBatch and ErrDecodeFailed as
// DecodeError (see their docs for the cache state after each).
func (ctx *Context) Decode(gctx context.Context, b *Batch) error {
	ctx.mu.Lock()
	defer ctx.mu.Unlock()
	return ctx.decode(gctx, b)
}

// decode is Decode with the lock held.
func (ctx *Context) decode(gctx context.Context, b *Batch) error {
	if err := ctx.check(); err != nil {
		return err
	}
	if err := b.check(); err != nil {
		return err
	}
	if err := ctx.validate(b); err != nil {
		return err
	}
	if err := ctx.checkEncoded(b); err != nil {
		return err
	}
	if err := gctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrAborted, err)
	}
	ctx.arm(gctx)
	testhook.Decoding(gctx)
	if gctx.Err() != nil {
		// Cancelled since the check above: AfterFunc's goroutine may not
		// have set the flag yet, and llama.cpp should stop at its first
		// check rather than evaluate the batch.
		atomic.StoreInt32(ctx.abort, 1)
	}
	ctx.lastN = 0
	b.c.SetNTokens(b.n)
	ctx.pools.decoded = true
	rc := ctx.decodeBatch(b)
	if rc == 0 && len(ctx.pools.retired) > 0 {
		ctx.pools.freeRetired()
	}
	if rc != 0 {
		detail := ""
		if rc != 2 {
			detail = takeLastError()
		}
		if rc == 2 && gctx.Err() != nil {
			return fmt.Errorf("%w: %w", &DecodeError{Code: rc}, gctx.Err())
		}
		return &DecodeError{Code: rc, Detail: detail}
	}
	copy(ctx.lastOutputs, b.outputs[:b.n])
	ctx.lastN = b.n
	return nil
}

func (ctx *Context) validate(b *Batch) error {
	if b.n == 0 {
		return invalid("empty batch")
	}
	if b.n > ctx.nBatch {
		return invalid("batch of %d tokens exceeds the context's batch size %d", b.n, ctx.nBatch)
	}
	if b.embd.used {
		if err := ctx.checkEmbdInput(b); err != nil {
			return err
		}
	}
	for i := range b.n {
		if t := b.tokens[i]; !b.embd.used && (t < 0 || int(t) >= ctx.nVocab) {
			return invalid("token %d at batch index %d outside the vocabulary [0, %d)", t, i, ctx.nVocab)
		}
		if b.pos[i] < 0 {
			return invalid("negative position %d at batch index %d", b.pos[i], i)
		}
		ns := int(b.nSeqID[i])
		if ns > 1 && !ctx.unified {
			return invalid("token at batch index %d belongs to %d sequences; that needs a unified KV cache", i, ns)
		}
		for _, s := range b.seqsOf(i) {
			if s < 0 || int(s) >= ctx.nSeq {
				return invalid("sequence id %d at batch index %d outside [0, %d)", s, i, ctx.nSeq)
			}
		}
	}
	return nil
}

// Logits returns the logits row of batch index i of the last successful
// Decode (the token must have been added with output set). The slice is a
// view of llama.cpp's buffer: it is valid until the next Decode or Close and
// must not be retained; modifying it in place is allowed. Keep the Context
// reachable while you read the view (a forgotten Context is freed by the
// garbage collector like a Close).
func (ctx *Context) Logits(i int) ([]float32, error) {
	ctx.mu.Lock()
	defer ctx.mu.Unlock()
	if err := ctx.check(); err != nil {
		return nil, err
	}
	if i < 0 || i >= ctx.lastN || ctx.lastOutputs[i] == 0 {
		return nil, invalid("batch index %d has no logits (last decode: %d tokens)", i, ctx.lastN)
	}
	p := ctx.c.LogitsIth(i)
	if p == nil {
		return nil, invalid("llama.cpp has no logits for batch index %d", i)
	}
	return unsafe.Slice(p, ctx.nVocab), nil
}

// CopyLogits copies the logits row of batch index i into dst (grown as
// needed) and returns it.
func (ctx *Context) CopyLogits(dst []float32, i int) ([]float32, error) {
	row, err := ctx.Logits(i)
	if err != nil {
		return dst, err
	}
	return append(dst[:0], row...), nil
}

// Perf holds llama.cpp's performance counters (timings need
// ContextParams.Perf). llama.cpp counts a decode of exactly one token as
// "eval" and any larger decode as "prompt eval".
type Perf struct {
	PromptEval       time.Duration
	Eval             time.Duration
	PromptEvalTokens int
	EvalTokens       int
	GraphReuses      int
}

// Perf returns the performance counters since creation or ResetPerf.
func (ctx *Context) Perf() Perf {
	ctx.mu.Lock()
	defer ctx.mu.Unlock()
	if ctx.check() != nil {
		return Perf{}
	}
	d := ctx.c.Perf()
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	return Perf{PromptEval: ms(d.PromptEvalMs), Eval: ms(d.EvalMs), PromptEvalTokens: int(d.NPromptEval),
		EvalTokens: int(d.NEval), GraphReuses: int(d.NReused)}
}

// ResetPerf zeroes the performance counters.
func (ctx *Context) ResetPerf() {
	ctx.mu.Lock()
	defer ctx.mu.Unlock()
	if ctx.check() == nil {
		ctx.c.PerfReset()
	}
}
