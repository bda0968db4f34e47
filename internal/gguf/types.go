package gguf

import (
	"fmt"
	"math"
)

// Version is the GGUF version this package writes and reads.
const Version = 3

// DefaultAlignment is the data alignment used when the metadata has no
// "general.alignment" entry.
const DefaultAlignment = 32

// KeyAlignment is the metadata key that overrides [DefaultAlignment].
const KeyAlignment = "general.alignment"

// maxNameLen is llama.cpp's GGML_MAX_NAME: tensor names must be shorter.
const maxNameLen = 64

// maxDims is llama.cpp's GGML_MAX_DIMS.
const maxDims = 4

// ValueType is the on-disk type tag of a metadata value (gguf_type).
type ValueType uint32

// The metadata value types. In Go a value of each type is held as the Go type
// named in its comment; an array of element type T as a slice of that Go type.
const (
	TypeUint8   ValueType = 0  // uint8
	TypeInt8    ValueType = 1  // int8
	TypeUint16  ValueType = 2  // uint16
	TypeInt16   ValueType = 3  // int16
	TypeUint32  ValueType = 4  // uint32
	TypeInt32   ValueType = 5  // int32
	TypeFloat32 ValueType = 6  // float32
	TypeBool    ValueType = 7  // bool
	TypeString  ValueType = 8  // string
	TypeArray   ValueType = 9  // a slice of one of the other types
	TypeUint64  ValueType = 10 // uint64
	TypeInt64   ValueType = 11 // int64
	TypeFloat64 ValueType = 12 // float64
)

var valueTypeNames = [...]string{"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64"}

// String returns llama.cpp's short name of the type, such as "u32".
func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("ValueType(%d)", uint32(t))
}

// scalarSize is the encoded size of one scalar of type t, 0 for strings,
// arrays and unknown types.
func (t ValueType) scalarSize() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// typeOf returns the GGUF type of a Go metadata value: for a slice, TypeArray
// and its element type.
func typeOf(v any) (typ, elem ValueType, err error) {
	switch v.(type) {
	case uint8:
		return TypeUint8, 0, nil
	case int8:
		return TypeInt8, 0, nil
	case uint16:
		return TypeUint16, 0, nil
	case int16:
		return TypeInt16, 0, nil
	case uint32:
		return TypeUint32, 0, nil
	case int32:
		return TypeInt32, 0, nil
	case float32:
		return TypeFloat32, 0, nil
	case bool:
		return TypeBool, 0, nil
	case string:
		return TypeString, 0, nil
	case uint64:
		return TypeUint64, 0, nil
	case int64:
		return TypeInt64, 0, nil
	case float64:
		return TypeFloat64, 0, nil
	case []uint8:
		return TypeArray, TypeUint8, nil
	case []int8:
		return TypeArray, TypeInt8, nil
	case []uint16:
		return TypeArray, TypeUint16, nil
	case []int16:
		return TypeArray, TypeInt16, nil
	case []uint32:
		return TypeArray, TypeUint32, nil
	case []int32:
		return TypeArray, TypeInt32, nil
	case []float32:
		return TypeArray, TypeFloat32, nil
	case []bool:
		return TypeArray, TypeBool, nil
	case []string:
		return TypeArray, TypeString, nil
	case []uint64:
		return TypeArray, TypeUint64, nil
	case []int64:
		return TypeArray, TypeInt64, nil
	case []float64:
		return TypeArray, TypeFloat64, nil
	}
	return 0, 0, fmt.Errorf("gguf: unsupported metadata value type %T", v)
}

// TensorType is a ggml tensor data type (ggml_type).
type TensorType uint32

// The ggml tensor types. Only F32 and F16 values can be read as numbers by
// this package; the others are known by size only.
const (
	TensorF32     TensorType = 0
	TensorF16     TensorType = 1
	TensorQ4_0    TensorType = 2
	TensorQ4_1    TensorType = 3
	TensorQ5_0    TensorType = 6
	TensorQ5_1    TensorType = 7
	TensorQ8_0    TensorType = 8
	TensorQ8_1    TensorType = 9
	TensorQ2_K    TensorType = 10
	TensorQ3_K    TensorType = 11
	TensorQ4_K    TensorType = 12
	TensorQ5_K    TensorType = 13
	TensorQ6_K    TensorType = 14
	TensorQ8_K    TensorType = 15
	TensorIQ2_XXS TensorType = 16
	TensorIQ2_XS  TensorType = 17
	TensorIQ3_XXS TensorType = 18
	TensorIQ1_S   TensorType = 19
	TensorIQ4_NL  TensorType = 20
	TensorIQ3_S   TensorType = 21
	TensorIQ2_S   TensorType = 22
	TensorIQ4_XS  TensorType = 23
	TensorI8      TensorType = 24
	TensorI16     TensorType = 25
	TensorI32     TensorType = 26
	TensorI64     TensorType = 27
	TensorF64     TensorType = 28
	TensorIQ1_M   TensorType = 29
	TensorBF16    TensorType = 30
	TensorTQ1_0   TensorType = 34
	TensorTQ2_0   TensorType = 35
	TensorMXFP4   TensorType = 39
)

type tensorTraits struct {
	name       string
	blockSize  uint64 // elements per block
	blockBytes uint64 // bytes per block
}

// tensorTypes mirrors ggml's type_traits (block sizes from ggml-common.h).
var tensorTypes = map[TensorType]tensorTraits{
	TensorF32:     {"f32", 1, 4},
	TensorF16:     {"f16", 1, 2},
	TensorQ4_0:    {"q4_0", 32, 18},
	TensorQ4_1:    {"q4_1", 32, 20},
	TensorQ5_0:    {"q5_0", 32, 22},
	TensorQ5_1:    {"q5_1", 32, 24},
	TensorQ8_0:    {"q8_0", 32, 34},
	TensorQ8_1:    {"q8_1", 32, 36},
	TensorQ2_K:    {"q2_K", 256, 84},
	TensorQ3_K:    {"q3_K", 256, 110},
	TensorQ4_K:    {"q4_K", 256, 144},
	TensorQ5_K:    {"q5_K", 256, 176},
	TensorQ6_K:    {"q6_K", 256, 210},
	TensorQ8_K:    {"q8_K", 256, 292},
	TensorIQ2_XXS: {"iq2_xxs", 256, 66},
	TensorIQ2_XS:  {"iq2_xs", 256, 74},
	TensorIQ3_XXS: {"iq3_xxs", 256, 98},
	TensorIQ1_S:   {"iq1_s", 256, 50},
	TensorIQ4_NL:  {"iq4_nl", 32, 18},
	TensorIQ3_S:   {"iq3_s", 256, 110},
	TensorIQ2_S:   {"iq2_s", 256, 82},
	TensorIQ4_XS:  {"iq4_xs", 256, 136},
	TensorI8:      {"i8", 1, 1},
	TensorI16:     {"i16", 1, 2},
	TensorI32:     {"i32", 1, 4},
	TensorI64:     {"i64", 1, 8},
	TensorF64:     {"f64", 1, 8},
	TensorIQ1_M:   {"iq1_m", 256, 56},
	TensorBF16:    {"bf16", 1, 2},
	TensorTQ1_0:   {"tq1_0", 256, 54},
	TensorTQ2_0:   {"tq2_0", 256, 66},
	TensorMXFP4:   {"mxfp4", 32, 17},
}

// String returns ggml's name of the type, such as "f16" or "q8_0".
func (t TensorType) String() string {
	if tr, ok := tensorTypes[t]; ok {
		return tr.name
	}
	return fmt.Sprintf("TensorType(%d)", uint32(t))
}

// BlockSize returns the number of elements in one block of the type (1 for
// unquantized types) and the bytes one block takes; ok is false for a type
// ggml does not define.
func (t TensorType) BlockSize() (elems, bytes uint64, ok bool) {
	tr, ok := tensorTypes[t]
	return tr.blockSize, tr.blockBytes, ok
}

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	// Name is the tensor's name, e.g. "blk.0.attn_q.weight".
	Name string
	// Type is the data type.
	Type TensorType
	// Shape lists the dimensions in ggml order: Shape[0] is the innermost.
	Shape []uint64
	// Offset is the data offset relative to the start of the data section.
	// The writer computes it; the reader reports it.
	Offset uint64
}

// Elements returns the number of elements (the product of Shape).
func (ti TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range ti.Shape {
		n *= d
	}
	return n
}

// Size returns the tensor's data size in bytes, without padding.
func (ti TensorInfo) Size() (uint64, error) {
	elems, bytes, ok := ti.Type.BlockSize()
	if !ok {
		return 0, fmt.Errorf("gguf: tensor %s has unknown type %d", Quote(ti.Name), uint32(ti.Type))
	}
	if len(ti.Shape) == 0 || len(ti.Shape) > maxDims {
		return 0, fmt.Errorf("gguf: tensor %s has %d dimensions, want 1 to %d", Quote(ti.Name), len(ti.Shape), maxDims)
	}
	if ti.Shape[0]%elems != 0 {
		return 0, fmt.Errorf("gguf: tensor %q of type %v has %d elements per row, not a multiple of the block size %d",
			ti.Name, ti.Type, ti.Shape[0], elems)
	}
	// The same bound as gguf.cpp: the element count must fit in an int64.
	n := uint64(1)
	for _, d := range ti.Shape {
		if d != 0 && n > math.MaxInt64/d {
			return 0, fmt.Errorf("gguf: tensor %s has too many elements", Quote(ti.Name))
		}
		n *= d
	}
	blocks := n / elems
	if bytes != 0 && blocks > math.MaxInt64/bytes {
		return 0, fmt.Errorf("gguf: tensor %s is too large", Quote(ti.Name))
	}
	return blocks * bytes, nil
}

// KV is one metadata entry. Value holds one of the Go types listed with the
// [ValueType] constants: a scalar, or a slice for an array.
type KV struct {
	Key   string
	Value any
}

func alignUp(n, align uint64) uint64 {
	return (n + align - 1) / align * align
}
