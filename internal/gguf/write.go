package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Writer streams a GGUF file: NewWriter writes the header at once (all offsets
// follow from the tensor shapes), then the tensor data is written in the order
// of the tensor infos, without padding (the Writer inserts it), and Close
// checks that every tensor got all its bytes.
type Writer struct {
	bw      *bufio.Writer
	tensors []TensorInfo
	sizes   []uint64
	align   uint64
	cur     int    // index of the tensor being written
	done    uint64 // bytes of tensors[cur] written so far
	err     error  // first write error; sticky
	scratch []byte
}

// NewWriter validates the metadata and tensor infos, computes the tensor
// offsets (the Offset fields of tensors are ignored) and writes the header to
// w. The metadata values must have the Go types listed with [ValueType].
func NewWriter(w io.Writer, metadata []KV, tensors []TensorInfo) (*Writer, error) {
	align := uint64(DefaultAlignment)
	keys := make(map[string]bool, len(metadata))
	for _, kv := range metadata {
		if kv.Key == "" {
			return nil, errors.New("gguf: empty metadata key")
		}
		if keys[kv.Key] {
			return nil, fmt.Errorf("gguf: duplicate metadata key %q", kv.Key)
		}
		keys[kv.Key] = true
		if _, _, err := typeOf(kv.Value); err != nil {
			return nil, fmt.Errorf("%w (key %q)", err, kv.Key)
		}
		if kv.Key == KeyAlignment {
			a, ok := kv.Value.(uint32)
			if !ok || a == 0 || a&(a-1) != 0 {
				return nil, fmt.Errorf("gguf: %s must be a uint32 power of two, got %T %v", KeyAlignment, kv.Value, kv.Value)
			}
			align = uint64(a)
		}
	}

	gw := &Writer{
		bw:      bufio.NewWriterSize(w, 1<<20),
		tensors: make([]TensorInfo, len(tensors)),
		sizes:   make([]uint64, len(tensors)),
		align:   align,
	}
	names := make(map[string]bool, len(tensors))
	offset := uint64(0)
	for i, t := range tensors {
		if t.Name == "" || len(t.Name) >= maxNameLen {
			return nil, fmt.Errorf("gguf: tensor name %q must have 1 to %d bytes", t.Name, maxNameLen-1)
		}
		if names[t.Name] {
			return nil, fmt.Errorf("gguf: duplicate tensor name %q", t.Name)
		}
		names[t.Name] = true
		size, err := t.Size()
		if err != nil {
			return nil, err
		}
		t.Shape = append([]uint64(nil), t.Shape...)
		t.Offset = offset
		gw.tensors[i] = t
		gw.sizes[i] = size
		offset += alignUp(size, align)
	}

	hdr := make([]byte, 0, 4096)
	hdr = append(hdr, "GGUF"...)
	hdr = binary.LittleEndian.AppendUint32(hdr, Version)
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(len(tensors)))
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(len(metadata)))
	for _, kv := range metadata {
		hdr = appendString(hdr, kv.Key)
		hdr = appendValue(hdr, kv.Value)
	}
	for _, t := range gw.tensors {
		hdr = appendString(hdr, t.Name)
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(len(t.Shape)))
		for _, d := range t.Shape {
			hdr = binary.LittleEndian.AppendUint64(hdr, d)
		}
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(t.Type))
		hdr = binary.LittleEndian.AppendUint64(hdr, t.Offset)
	}
	for uint64(len(hdr))%align != 0 {
		hdr = append(hdr, 0)
	}
	if _, err := gw.bw.Write(hdr); err != nil {
		return nil, err
	}
	gw.skipEmpty()
	return gw, nil
}

// Tensors returns the tensor infos with their offsets.
func (w *Writer) Tensors() []TensorInfo {
	return w.tensors
}

// skipEmpty moves past zero-byte tensors.
func (w *Writer) skipEmpty() {
	for w.cur < len(w.tensors) && w.sizes[w.cur] == 0 {
		w.cur++
	}
}

// Write appends raw tensor bytes: the data of the tensors in order, without
// padding. It may cross tensor boundaries; writing past the last tensor is an
// error.
func (w *Writer) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if w.err != nil {
			return n, w.err
		}
		if w.cur >= len(w.tensors) {
			return n, errors.New("gguf: write past the end of the tensor data")
		}
		k := min(uint64(len(p)), w.sizes[w.cur]-w.done)
		if _, err := w.bw.Write(p[:k]); err != nil {
			w.err = err
			return n, err
		}
		n += int(k)
		p = p[k:]
		w.advance(k)
	}
	return n, nil
}

// advance records k bytes of the current tensor and pads after a tensor
// completes.
func (w *Writer) advance(k uint64) {
	w.done += k
	if w.done < w.sizes[w.cur] {
		return
	}
	for pad := alignUp(w.sizes[w.cur], w.align) - w.sizes[w.cur]; pad > 0; pad-- {
		if err := w.bw.WriteByte(0); err != nil {
			w.err = err
			return
		}
	}
	w.cur++
	w.done = 0
	w.skipEmpty()
}

// WriteFloat32s appends values to the tensor data, encoded as the type of the
// tensor they fall into, which must be F32 or F16 (rounded to nearest even).
// Like Write it may cross tensor boundaries.
func (w *Writer) WriteFloat32s(values []float32) error {
	for len(values) > 0 {
		if w.err != nil {
			return w.err
		}
		if w.cur >= len(w.tensors) {
			return errors.New("gguf: write past the end of the tensor data")
		}
		t := w.tensors[w.cur]
		var width uint64
		switch t.Type {
		case TensorF32:
			width = 4
		case TensorF16:
			width = 2
		default:
			return fmt.Errorf("gguf: cannot encode floats as %v (tensor %q)", t.Type, t.Name)
		}
		k := min(uint64(len(values)), (w.sizes[w.cur]-w.done)/width)
		chunk := values[:k]
		values = values[k:]
		for len(chunk) > 0 {
			m := min(len(chunk), 1<<14)
			buf := w.scratch[:0]
			if width == 4 {
				for _, v := range chunk[:m] {
					buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
				}
			} else {
				for _, v := range chunk[:m] {
					buf = binary.LittleEndian.AppendUint16(buf, Float32ToFloat16(v))
				}
			}
			w.scratch = buf
			chunk = chunk[m:]
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close flushes the buffered output and reports an error if some tensor data
// is missing. It does not close the underlying writer.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if w.cur < len(w.tensors) {
		t := w.tensors[w.cur]
		return fmt.Errorf("gguf: tensor %q has %d of %d bytes", t.Name, w.done, w.sizes[w.cur])
	}
	return w.bw.Flush()
}

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// appendValue encodes a value whose type typeOf accepted.
func appendValue(b []byte, v any) []byte {
	typ, elem, _ := typeOf(v)
	b = binary.LittleEndian.AppendUint32(b, uint32(typ))
	if typ != TypeArray {
		return appendScalar(b, v)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(elem))
	switch a := v.(type) {
	case []uint8:
		return appendArray(b, a)
	case []int8:
		return appendArray(b, a)
	case []uint16:
		return appendArray(b, a)
	case []int16:
		return appendArray(b, a)
	case []uint32:
		return appendArray(b, a)
	case []int32:
		return appendArray(b, a)
	case []float32:
		return appendArray(b, a)
	case []bool:
		return appendArray(b, a)
	case []string:
		return appendArray(b, a)
	case []uint64:
		return appendArray(b, a)
	case []int64:
		return appendArray(b, a)
	case []float64:
		return appendArray(b, a)
	}
	panic("unreachable: typeOf accepted an unknown array type")
}

func appendArray[T any](b []byte, a []T) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(a)))
	for _, e := range a {
		b = appendScalar(b, e)
	}
	return b
}

func appendScalar(b []byte, v any) []byte {
	le := binary.LittleEndian
	switch x := v.(type) {
	case uint8:
		return append(b, x)
	case int8:
		return append(b, byte(x))
	case uint16:
		return le.AppendUint16(b, x)
	case int16:
		return le.AppendUint16(b, uint16(x))
	case uint32:
		return le.AppendUint32(b, x)
	case int32:
		return le.AppendUint32(b, uint32(x))
	case float32:
		return le.AppendUint32(b, math.Float32bits(x))
	case bool:
		if x {
			return append(b, 1)
		}
		return append(b, 0)
	case string:
		return appendString(b, x)
	case uint64:
		return le.AppendUint64(b, x)
	case int64:
		return le.AppendUint64(b, uint64(x))
	case float64:
		return le.AppendUint64(b, math.Float64bits(x))
	}
	panic("unreachable: typeOf accepted an unknown scalar type")
}
