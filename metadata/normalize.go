package metadata

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// TokenMetadata is the normalized token document: the `metadata` member of a Token.
type TokenMetadata struct {
	Name            *string         `json:"name"`
	Description     *string         `json:"description"`
	Image           *string         `json:"image"`
	AnimationURL    *string         `json:"animationUrl"`
	ExternalURL     *string         `json:"externalUrl"`
	BackgroundColor *string         `json:"backgroundColor"`
	Attributes      []Attribute     `json:"attributes"` // [] in JSON when none
	Properties      json.RawMessage `json:"properties"` // an object; {} in JSON when none
}

// Attribute is one trait of a token.
type Attribute struct {
	TraitType   *string         `json:"traitType"`
	Value       json.RawMessage `json:"value"` // any JSON value; null when absent
	DisplayType *string         `json:"displayType,omitempty"`
}

// EmptyTokenMetadata is the metadata of a token whose document could not be had.
func EmptyTokenMetadata() TokenMetadata {
	return TokenMetadata{Attributes: []Attribute{}, Properties: json.RawMessage("{}")}
}

// MarshalJSON writes empty attributes as [] and empty properties as {}, never null.
func (m TokenMetadata) MarshalJSON() ([]byte, error) {
	type plain TokenMetadata
	p := plain(m)
	if p.Attributes == nil {
		p.Attributes = []Attribute{}
	}
	if len(bytes.TrimSpace(p.Properties)) == 0 {
		p.Properties = json.RawMessage("{}")
	}
	return json.Marshal(p)
}

// NormalizeToken reads a token document (ERC721/ERC1155 metadata JSON, in any of the
// spellings seen in the wild: snake_case, camelCase, attributes as a list or a map, traits)
// into TokenMetadata. It fails only when doc is not a JSON object.
func NormalizeToken(doc []byte) (TokenMetadata, error) {
	o, err := parseObject(doc)
	if err != nil {
		return TokenMetadata{}, err
	}
	m := EmptyTokenMetadata()
	m.Name = o.str("name")
	m.Description = o.str("description")
	m.Image = o.str("image", "image_url", "imageurl", "imageuri", "image_uri")
	m.AnimationURL = o.str("animation_url", "animationurl")
	m.ExternalURL = o.str("external_url", "externalurl")
	m.BackgroundColor = o.str("background_color", "backgroundcolor")
	for _, k := range []string{"attributes", "traits"} {
		if attrs, ok := attributes(o[k]); ok {
			m.Attributes = attrs
			break
		}
	}
	if p := o["properties"]; len(p) > 0 && p[0] == '{' {
		m.Properties = compactJSON(p)
	}
	return m, nil
}

// ContractMetadata is the normalized contractURI document, in the snake_case marketplaces
// publish.
type ContractMetadata struct {
	Name                 *string `json:"name"`
	Description          *string `json:"description"`
	Image                *string `json:"image"`
	ExternalLink         *string `json:"external_link"`
	SellerFeeBasisPoints *int64  `json:"seller_fee_basis_points"`
	FeeRecipient         *string `json:"fee_recipient"` // lowercase 0x address
}

// NormalizeContract reads a contractURI document into ContractMetadata. It fails only when
// doc is not a JSON object.
func NormalizeContract(doc []byte) (ContractMetadata, error) {
	o, err := parseObject(doc)
	if err != nil {
		return ContractMetadata{}, err
	}
	return ContractMetadata{
		Name:                 o.str("name"),
		Description:          o.str("description"),
		Image:                o.str("image", "image_url", "imageurl", "imageuri", "image_uri"),
		ExternalLink:         o.str("external_link", "externallink", "external_url", "externalurl"),
		SellerFeeBasisPoints: basisPoints(o.first("seller_fee_basis_points", "sellerfeebasispoints")),
		FeeRecipient:         lowerAddress(o.str("fee_recipient", "feerecipient")),
	}, nil
}

// object is a JSON object's members by lowercased key; of keys equal but for case, the
// last one wins.
type object map[string]json.RawMessage

func parseObject(doc []byte) (object, error) {
	doc, err := jsonObject(doc)
	if err != nil {
		return nil, err
	}
	members, ok := orderedMembers(doc)
	if !ok {
		return nil, failure(reasonNotJSON)
	}
	o := make(object, len(members))
	for _, mb := range members {
		o[strings.ToLower(mb.key)] = mb.value
	}
	return o, nil
}

// first is the value of the first of keys present and not null.
func (o object) first(keys ...string) json.RawMessage {
	for _, k := range keys {
		if v, ok := o[k]; ok && !isNull(v) {
			return v
		}
	}
	return nil
}

// str is the first of keys that has a string value (see stringValue).
func (o object) str(keys ...string) *string {
	for _, k := range keys {
		if s := stringValue(o[k]); s != nil {
			return s
		}
	}
	return nil
}

// stringValue reads a JSON string; a number or a boolean gives its JSON text; null, an
// object or an array gives nil.
func stringValue(raw json.RawMessage) *string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil
		}
		return &s
	case 'n', '{', '[':
		return nil
	}
	s := string(raw) // number, true, false
	return &s
}

type member struct {
	key   string
	value json.RawMessage
}

// orderedMembers lists the members of the JSON object doc in document order.
func orderedMembers(doc []byte) ([]member, bool) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var out []member
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, ok := t.(string)
		if !ok {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		out = append(out, member{key: key, value: v})
	}
	return out, true
}

// attributes reads a list of attributes, or a map of trait type to value; ok is false when
// raw is neither.
func attributes(raw json.RawMessage) ([]Attribute, bool) {
	if len(raw) == 0 {
		return nil, false
	}
	switch raw[0] {
	case '{':
		members, ok := orderedMembers(raw)
		if !ok {
			return nil, false
		}
		out := make([]Attribute, 0, len(members))
		for _, mb := range members {
			out = append(out, Attribute{TraitType: &mb.key, Value: compactJSON(mb.value)})
		}
		return out, true
	case '[':
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return nil, false
		}
		out := make([]Attribute, 0, len(items))
		for _, item := range items {
			if a, ok := attribute(item); ok {
				out = append(out, a)
			}
		}
		return out, true
	}
	return nil, false
}

// attribute reads one element of an attribute list: an object with trait_type and value, or
// a bare value without a trait type. null and nested arrays are skipped.
func attribute(item json.RawMessage) (Attribute, bool) {
	switch {
	case len(item) == 0, isNull(item), item[0] == '[':
		return Attribute{}, false
	case item[0] != '{':
		return Attribute{Value: compactJSON(item)}, true
	}
	o, err := parseObject(item)
	if err != nil {
		return Attribute{}, false
	}
	a := Attribute{
		TraitType:   o.str("trait_type", "traittype"),
		Value:       json.RawMessage("null"),
		DisplayType: o.str("display_type", "displaytype"),
	}
	if v, ok := o["value"]; ok {
		a.Value = compactJSON(v)
	}
	return a, true
}

// basisPoints reads a royalty in basis points: an integer from 0 to 10000, as a number or a
// numeric string.
func basisPoints(raw json.RawMessage) *int64 {
	s := stringValue(raw)
	if s == nil {
		return nil
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(*s), 64)
	if err != nil || f != math.Trunc(f) || f < 0 || f > 10000 {
		return nil
	}
	n := int64(f)
	return &n
}

// lowerAddress returns s as a lowercase 0x address when it is one (ParseAddress: a mixed-case
// one must carry a valid EIP-55 checksum), else nil.
func lowerAddress(s *string) *string {
	if s == nil {
		return nil
	}
	a, err := ParseAddress(strings.TrimSpace(*s))
	if err != nil {
		return nil
	}
	out := strings.ToLower(a.Hex())
	return &out
}

func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// compactJSON returns raw without insignificant white space.
func compactJSON(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return json.RawMessage("null")
	}
	return b.Bytes()
}
