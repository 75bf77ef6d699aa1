package openapi

import (
	"bytes"
	"encoding/json"
)

// object is a JSON object that keeps the order of its members.
type object struct {
	keys []string
	vals map[string]any
}

func (o *object) has(k string) bool {
	if o == nil {
		return false
	}
	_, ok := o.vals[k]
	return ok
}

// get returns the member k, nil when absent (or when o is nil).
func (o *object) get(k string) any {
	if o == nil {
		return nil
	}
	return o.vals[k]
}

func (o *object) set(k string, v any) {
	if o.vals == nil {
		o.vals = map[string]any{}
	}
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

// without is a shallow copy of o less the member k.
func (o *object) without(k string) *object {
	out := &object{}
	for _, key := range o.keys {
		if key != k {
			out.set(key, o.vals[key])
		}
	}
	return out
}

func (o *object) keysOrNone() []string {
	if o == nil {
		return nil
	}
	return o.keys
}

// MarshalJSON writes the members in their order.
func (o *object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keysOrNone() {
		if i > 0 {
			b.WriteByte(',')
		}
		key, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		b.Write(key)
		b.WriteByte(':')
		val, err := json.Marshal(o.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(val)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
