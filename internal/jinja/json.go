package jinja

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// FromJSON reads a JSON document as a Value: objects become dicts that
// keep their keys' order (which tojson then keeps), numbers ints where
// they are integers. Nesting deeper than maxDepth is an error, so that a
// template walking the value keeps to a bounded stack.
func FromJSON(data []byte, maxDepth int) (Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeJSON(dec, 0, maxDepth)
	if err != nil {
		return Value{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return Value{}, errors.New("more than one JSON value")
	}
	return v, nil
}

func decodeJSON(dec *json.Decoder, depth, maxDepth int) (Value, error) {
	if depth > maxDepth {
		return Value{}, fmt.Errorf("values nested deeper than %d levels", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return Value{}, err
	}
	switch x := tok.(type) {
	case json.Delim:
		switch x {
		case '{':
			d := NewDict()
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return Value{}, err
				}
				v, err := decodeJSON(dec, depth+1, maxDepth)
				if err != nil {
					return Value{}, err
				}
				d.AsDict().Set(k.(string), v)
			}
			if _, err := dec.Token(); err != nil {
				return Value{}, err
			}
			return d, nil
		case '[':
			items := []Value{}
			for dec.More() {
				v, err := decodeJSON(dec, depth+1, maxDepth)
				if err != nil {
					return Value{}, err
				}
				items = append(items, v)
			}
			if _, err := dec.Token(); err != nil {
				return Value{}, err
			}
			return NewList(items), nil
		}
	case string:
		return NewString(x), nil
	case bool:
		return NewBool(x), nil
	case nil:
		return None(), nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return NewInt(i), nil
		}
		f, err := x.Float64()
		if err != nil {
			return Value{}, err
		}
		return NewFloat(f), nil
	}
	return Value{}, fmt.Errorf("unexpected JSON token %v", tok)
}
