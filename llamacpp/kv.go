package llamacpp

// KV-cache sequence operations. Positions are per cell: in a unified cache a
// cell shared by several sequences (after SeqCopy) has one position for all
// of them, so shifting a shared cell moves it in every sequence. Ranges are
// [p0, p1) with p0 < 0 meaning from 0 and p1 < 0 meaning to the end.

func (ctx *Context) checkSeq(seq int32) error {
	if err := ctx.check(); err != nil {
		return err
	}
	if seq < 0 || int(seq) >= ctx.nSeq {
		return invalid("sequence id %d outside [0, %d)", seq, ctx.nSeq)
	}
	return nil
}

// ClearCache removes every cell of every sequence.
func (ctx *Context) ClearCache() error {
	ctx.mu.Lock()
	defer ctx.mu.Unlock()
	return ctx.clearCache()
}

// clearCache is ClearCache with the lock held.
func (ctx *Context) clearCache() error {
	if err := ctx.check(); err != nil {
		return err
	}
	ctx.c.MemoryClear(false)
	return nil
}

// SeqRemove removes seq's cells with positions in [p0, p1). In a unified
// cache a shared cell only loses seq's membership. After removing a tail,
// decoding continues at SeqPosMax+1; removing a middle range leaves a gap
// that must be closed with SeqShift before decoding the sequence again.
func (ctx *Context) SeqRemove(seq, p0, p1 int32) error {
	ctx.mu.Lock()
	defer ctx.mu.Unlock()
	if err := ctx.checkSeq(seq); err != nil {
		return err
	}
	if !ctx.c.SeqRm(seq, p0, p1) {
		return invalid("llama.cpp cannot remove a partial range of sequence %d", seq)
	}
	return nil
}

// SeqCopy makes dst hold src's cells with positions in [p0, p1) in addition
// to what dst holds. In a unified cache the cells are shared, not
// duplicated, and any range works; the sequences diverge as new tokens are
// decoded into fresh cells. Without a unified cache only the whole sequence
// can be copied (p0 < 0, p1 < 0): dst's stream is replaced by a copy of
// src's, paid for at the next Decode. Copying a sequence onto itself does
// nothing. To replace dst with src, SeqRemove(dst, -1, -1) first.
func (ctx *Context) SeqCopy(src, dst, p0, p1 int32) error {
	ctx.mu.Lock()
	defer ctx.mu.Unlock()
	if err := ctx.checkSeq(src); err != nil {
		return err
	}
	if err := ctx.checkSeq(dst); err != nil {
		return err
	}
	if !ctx.unified && (p0 > 0 || p1 >= 0) {
		return invalid("partial SeqCopy [%d, %d) needs a unified KV cache; copy everything and SeqRemove the tail", p0, p1)
	}
	ctx.c.SeqCp(src, dst, p0, p1)
	return nil
}

// SeqKeep removes every cell that does not belong to seq, in both cache
// layouts (llama.cpp's own seq_keep only reaches seq's stream when the cache
// is not unified, so the other sequences are removed one by one there).
func (ctx *Context) SeqKeep(seq int32) error {
	ctx.mu.Lock()
	defer ctx.mu.Unlock()
	if err := ctx.checkSeq(seq); err != nil {
		return err
	}
	if ctx.unified {
		ctx.c.SeqKeep(seq)
		return nil
	}
	for s := range int32(ctx.nSeq) {
		if s != seq {
			ctx.c.SeqRm(s, -1, -1)
		}
	}
	return nil
}

// SeqShift adds delta to the positions of seq's cells in [p0, p1); cells
// moved below 0 are removed. The keys are re-rotated at the next Decode.
func (ctx *Context) SeqShift(seq, p0, p1, delta int32) error {
	ctx.mu.Lock()
	defer ctx.mu.Unlock()
	if err := ctx.checkSeq(seq); err != nil {
		return err
	}
	if !ctx.c.CanShift() || !ctx.model.canShift() {
		return invalid("this model's cache cannot shift positions")
	}
	ctx.c.SeqAdd(seq, p0, p1, delta)
	return nil
}

// SeqDivide integer-divides the positions of seq's cells in [p0, p1) by d.
func (ctx *Context) SeqDivide(seq, p0, p1, d int32) error {
	ctx.mu.Lock()
	defer ctx.mu.Unlock()
	if err := ctx.checkSeq(seq); err != nil {
		return err
	}
	if d < 1 {
		return invalid("divisor %d", d)
	}
	if !ctx.c.CanShift() || !ctx.model.canShift() {
		return invalid("this model's cache cannot shift positions")
	}
	ctx.c.SeqDiv(seq, p0, p1, d)
	return nil
}

// SeqPosMin is the smallest position of seq, or -1 when seq is empty.
func (ctx *Context) SeqPosMin(seq int32) (int32, error) {
	ctx.mu.Lock()
	defer ctx.mu.Unlock()
	if err := ctx.checkSeq(seq); err != nil {
		return -1, err
	}
	return ctx.c.SeqPosMin(seq), nil
}

// SeqPosMax is the largest position of seq, or -1 when seq is empty. Every
// position between SeqPosMin and SeqPosMax is present unless a middle range
// was removed.
func (ctx *Context) SeqPosMax(seq int32) (int32, error) {
	ctx.mu.Lock()
	defer ctx.mu.Unlock()
	if err := ctx.checkSeq(seq); err != nil {
		return -1, err
	}
	return ctx.c.SeqPosMax(seq), nil
}
