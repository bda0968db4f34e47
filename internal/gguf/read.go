package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
)

// ErrUnsupportedType is returned when tensor values of a type this package
// cannot decode (any quantized type) are requested.
var ErrUnsupportedType = errors.New("gguf: tensor type not supported for reading values")

// File is the parsed header of a GGUF file.
type File struct {
	// Version is the file's GGUF version (2 or 3).
	Version uint32
	// Metadata holds the key/value entries in file order.
	Metadata []KV
	// Tensors holds the tensor infos in file order.
	Tensors []TensorInfo
	// Alignment is the data alignment in bytes.
	Alignment uint64
	// DataOffset is the absolute file offset of the data section.
	DataOffset uint64

	kvIndex     map[string]int
	tensorIndex map[string]int
}

// Lookup returns the metadata value of key.
func (f *File) Lookup(key string) (any, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return nil, false
	}
	return f.Metadata[i].Value, true
}

// Get returns the metadata value of key as a T, which must be the value's
// exact Go type (see [ValueType]).
func Get[T any](f *File, key string) (T, error) {
	var zero T
	v, ok := f.Lookup(key)
	if !ok {
		return zero, fmt.Errorf("gguf: no metadata key %s", Quote(key))
	}
	t, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("gguf: metadata key %s is %T, not %T", Quote(key), v, zero)
	}
	return t, nil
}

// Tensor returns the info of the named tensor.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.tensorIndex[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Tensors[i], true
}

// Reader gives access to a GGUF file's header and tensor data.
type Reader struct {
	*File
	r      io.ReaderAt
	closer io.Closer
}

// Open opens and parses the GGUF file at path. Close the Reader when done.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	r, err := NewReader(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r.closer = f
	return r, nil
}

// NewReader parses the header of the GGUF data of the given size in r. It
// checks everything llama.cpp's gguf loader checks, and that all tensor data
// lies within size.
func NewReader(r io.ReaderAt, size int64) (*Reader, error) {
	if size < 0 {
		return nil, errors.New("gguf: negative size")
	}
	p := &parser{br: bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 1<<16), size: uint64(size)}
	f, err := p.parse()
	if err != nil {
		return nil, err
	}
	return &Reader{File: f, r: r}, nil
}

// Close closes the file opened by Open; it is a no-op for NewReader.
func (r *Reader) Close() error {
	if r.closer == nil {
		return nil
	}
	err := r.closer.Close()
	r.closer = nil
	return err
}

// TensorBytes returns the raw data of the named tensor.
func (r *Reader) TensorBytes(name string) ([]byte, error) {
	t, ok := r.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("gguf: no tensor %s", Quote(name))
	}
	size, err := t.Size()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	if _, err := r.r.ReadAt(buf, int64(r.DataOffset+t.Offset)); err != nil {
		return nil, fmt.Errorf("gguf: reading tensor %s: %w", Quote(name), err)
	}
	return buf, nil
}

// Float64s returns the values of the named F32 or F16 tensor, in storage
// order (Shape[0] innermost), converted exactly to float64. Other types give
// an error wrapping ErrUnsupportedType.
func (r *Reader) Float64s(name string) ([]float64, error) {
	t, ok := r.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("gguf: no tensor %s", Quote(name))
	}
	if t.Type != TensorF32 && t.Type != TensorF16 {
		return nil, fmt.Errorf("%w: %s is %v", ErrUnsupportedType, Quote(name), t.Type)
	}
	raw, err := r.TensorBytes(name)
	if err != nil {
		return nil, err
	}
	out := make([]float64, t.Elements())
	if t.Type == TensorF32 {
		for i := range out {
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
		}
	} else {
		for i := range out {
			out[i] = float64(Float16ToFloat32(binary.LittleEndian.Uint16(raw[2*i:])))
		}
	}
	return out, nil
}

// parser reads the header sequentially, never allocating more than the bytes
// left in the input could encode.
type parser struct {
	br   *bufio.Reader
	pos  uint64
	size uint64
	buf  [8]byte
}

var errTruncated = errors.New("gguf: truncated file")

func (p *parser) left() uint64 { return p.size - p.pos }

func (p *parser) read(n int) ([]byte, error) {
	if _, err := io.ReadFull(p.br, p.buf[:n]); err != nil {
		return nil, errTruncated
	}
	p.pos += uint64(n)
	return p.buf[:n], nil
}

func (p *parser) u8() (uint8, error) {
	b, err := p.read(1)
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

func (p *parser) u16() (uint16, error) {
	b, err := p.read(2)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint16(b), nil
}

func (p *parser) u32() (uint32, error) {
	b, err := p.read(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (p *parser) u64() (uint64, error) {
	b, err := p.read(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (p *parser) str() (string, error) {
	n, err := p.u64()
	if err != nil {
		return "", err
	}
	if n > p.left() {
		return "", errTruncated
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(p.br, b); err != nil {
		return "", errTruncated
	}
	p.pos += n
	return string(b), nil
}

func (p *parser) parse() (*File, error) {
	magic, err := p.read(4)
	if err != nil {
		return nil, errors.New("gguf: not a GGUF file (too short)")
	}
	if string(magic) != "GGUF" {
		return nil, fmt.Errorf("gguf: not a GGUF file (magic %q)", magic)
	}
	f := &File{kvIndex: map[string]int{}, tensorIndex: map[string]int{}}
	if f.Version, err = p.u32(); err != nil {
		return nil, err
	}
	if f.Version != 2 && f.Version != 3 {
		return nil, fmt.Errorf("gguf: unsupported version %d", f.Version)
	}
	nTensors, err := p.u64()
	if err != nil {
		return nil, err
	}
	nKV, err := p.u64()
	if err != nil {
		return nil, err
	}
	// Smallest encodings: a KV is a key length, a type and a 1-byte value; a
	// tensor info is a name length, n_dims, one dimension, type and offset.
	if nKV > p.left()/13 {
		return nil, fmt.Errorf("gguf: %d metadata entries cannot fit in the file", nKV)
	}
	if nTensors > p.left()/32 {
		return nil, fmt.Errorf("gguf: %d tensors cannot fit in the file", nTensors)
	}

	f.Metadata = make([]KV, 0, nKV)
	for i := uint64(0); i < nKV; i++ {
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		if key == "" {
			return nil, fmt.Errorf("gguf: metadata entry %d has an empty key", i)
		}
		if _, dup := f.kvIndex[key]; dup {
			return nil, fmt.Errorf("gguf: duplicate metadata key %s", Quote(key))
		}
		v, err := p.value()
		if err != nil {
			return nil, fmt.Errorf("gguf: metadata key %s: %w", Quote(key), err)
		}
		f.kvIndex[key] = len(f.Metadata)
		f.Metadata = append(f.Metadata, KV{Key: key, Value: v})
	}

	f.Alignment = DefaultAlignment
	if v, ok := f.Lookup(KeyAlignment); ok {
		a, ok := v.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 {
			return nil, fmt.Errorf("gguf: %s must be a uint32 power of two, got %T %v", KeyAlignment, v, v)
		}
		f.Alignment = uint64(a)
	}

	f.Tensors = make([]TensorInfo, 0, nTensors)
	for i := uint64(0); i < nTensors; i++ {
		t, err := p.tensorInfo()
		if err != nil {
			return nil, err
		}
		if _, dup := f.tensorIndex[t.Name]; dup {
			return nil, fmt.Errorf("gguf: duplicate tensor name %s", Quote(t.Name))
		}
		f.tensorIndex[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}

	f.DataOffset = alignUp(p.pos, f.Alignment)
	expected := uint64(0)
	for _, t := range f.Tensors {
		if t.Offset != expected {
			return nil, fmt.Errorf("gguf: tensor %s has offset %d, expected %d", Quote(t.Name), t.Offset, expected)
		}
		size, err := t.Size()
		if err != nil {
			return nil, err
		}
		if size > p.size || f.DataOffset+t.Offset > p.size-size {
			return nil, fmt.Errorf("gguf: tensor %s data is not within the file (%w)", Quote(t.Name), errTruncated)
		}
		expected += alignUp(size, f.Alignment)
	}
	return f, nil
}

func (p *parser) tensorInfo() (TensorInfo, error) {
	var t TensorInfo
	var err error
	if t.Name, err = p.str(); err != nil {
		return t, err
	}
	if len(t.Name) >= maxNameLen {
		return t, fmt.Errorf("gguf: tensor name %s is too long", Quote(t.Name))
	}
	nDims, err := p.u32()
	if err != nil {
		return t, err
	}
	if nDims == 0 || nDims > maxDims {
		return t, fmt.Errorf("gguf: tensor %s has %d dimensions, want 1 to %d", Quote(t.Name), nDims, maxDims)
	}
	t.Shape = make([]uint64, nDims)
	for j := range t.Shape {
		if t.Shape[j], err = p.u64(); err != nil {
			return t, err
		}
		if t.Shape[j] > math.MaxInt64 {
			return t, fmt.Errorf("gguf: tensor %s has a negative dimension", Quote(t.Name))
		}
	}
	typ, err := p.u32()
	if err != nil {
		return t, err
	}
	t.Type = TensorType(typ)
	if _, err := t.Size(); err != nil {
		return t, err
	}
	if t.Offset, err = p.u64(); err != nil {
		return t, err
	}
	return t, nil
}

func (p *parser) value() (any, error) {
	typ, err := p.u32()
	if err != nil {
		return nil, err
	}
	if ValueType(typ) != TypeArray {
		return p.scalar(ValueType(typ))
	}
	elem, err := p.u32()
	if err != nil {
		return nil, err
	}
	n, err := p.u64()
	if err != nil {
		return nil, err
	}
	minSize := uint64(ValueType(elem).scalarSize())
	if ValueType(elem) == TypeString {
		minSize = 8
	}
	if minSize == 0 {
		return nil, fmt.Errorf("invalid array element type %d", elem)
	}
	if n > p.left()/minSize {
		return nil, errTruncated
	}
	switch ValueType(elem) {
	case TypeUint8:
		return readArray(p, n, (*parser).u8)
	case TypeInt8:
		return readArray(p, n, func(p *parser) (int8, error) { v, err := p.u8(); return int8(v), err })
	case TypeUint16:
		return readArray(p, n, (*parser).u16)
	case TypeInt16:
		return readArray(p, n, func(p *parser) (int16, error) { v, err := p.u16(); return int16(v), err })
	case TypeUint32:
		return readArray(p, n, (*parser).u32)
	case TypeInt32:
		return readArray(p, n, func(p *parser) (int32, error) { v, err := p.u32(); return int32(v), err })
	case TypeFloat32:
		return readArray(p, n, func(p *parser) (float32, error) { v, err := p.u32(); return math.Float32frombits(v), err })
	case TypeBool:
		return readArray(p, n, func(p *parser) (bool, error) { v, err := p.u8(); return v != 0, err })
	case TypeString:
		return readArray(p, n, (*parser).str)
	case TypeUint64:
		return readArray(p, n, (*parser).u64)
	case TypeInt64:
		return readArray(p, n, func(p *parser) (int64, error) { v, err := p.u64(); return int64(v), err })
	default: // TypeFloat64; the other types were rejected above
		return readArray(p, n, func(p *parser) (float64, error) { v, err := p.u64(); return math.Float64frombits(v), err })
	}
}

// maxPrealloc bounds the elements readArray allocates before reading them.
// The count is bounded by the bytes left, but a Go string takes 16 bytes
// for a file's minimal 8, so trusting a corrupt count of strings would
// allocate twice the rest of the file before the first element fails to
// parse; beyond the bound the slice grows with what was actually read.
const maxPrealloc = 4096

func readArray[T any](p *parser, n uint64, read func(*parser) (T, error)) ([]T, error) {
	out := make([]T, 0, min(n, maxPrealloc))
	for range n {
		v, err := read(p)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (p *parser) scalar(t ValueType) (any, error) {
	switch t {
	case TypeUint8:
		return p.u8()
	case TypeInt8:
		v, err := p.u8()
		return int8(v), err
	case TypeUint16:
		return p.u16()
	case TypeInt16:
		v, err := p.u16()
		return int16(v), err
	case TypeUint32:
		return p.u32()
	case TypeInt32:
		v, err := p.u32()
		return int32(v), err
	case TypeFloat32:
		v, err := p.u32()
		return math.Float32frombits(v), err
	case TypeBool:
		v, err := p.u8()
		return v != 0, err
	case TypeString:
		return p.str()
	case TypeUint64:
		return p.u64()
	case TypeInt64:
		v, err := p.u64()
		return int64(v), err
	case TypeFloat64:
		v, err := p.u64()
		return math.Float64frombits(v), err
	}
	return nil, fmt.Errorf("invalid value type %d", uint32(t))
}

// Quote quotes a name read from a file for an error message, as %q does,
// cut to its first 64 bytes: a corrupt length can make a key or a token
// span most of the file.
func Quote(s string) string {
	const most = 64
	if len(s) <= most {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:most]) + "... (" + strconv.Itoa(len(s)) + " bytes)"
}
