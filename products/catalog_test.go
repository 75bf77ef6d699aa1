package products

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

// importFile is what `web3gate products import` does with a file.
func importFile(ctx context.Context, e *env, name, data string) (Summary, error) {
	ps, err := ParseFile(name, []byte(data))
	if err != nil {
		return Summary{}, err
	}
	return Import(ctx, e.db, ps)
}

func TestImport(t *testing.T) {
	e := newEnv(t, Config{}, Deps{})
	raw, err := os.ReadFile("../examples/products.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := importFile(e.ctx, e, "products.yaml", string(raw))
	if err != nil || sum != (Summary{Inserted: 8}) {
		t.Fatalf("first import: %+v, %v", sum, err)
	}
	before := e.rows()
	if strings.Count(before, "\n") != 8 {
		t.Fatalf("rows after the import:\n%s", before)
	}
	// Idempotent: the same file again changes nothing.
	if sum, err = importFile(e.ctx, e, "products.yaml", string(raw)); err != nil || sum != (Summary{Unchanged: 8}) {
		t.Fatalf("second import: %+v, %v", sum, err)
	}
	if after := e.rows(); after != before {
		t.Fatalf("the same import changed the rows:\n%s\nwas\n%s", after, before)
	}

	// A file that changes one product and adds another: one of each.
	changed := doc(t, map[string]any{"id": "681d6956-da94-5297-aa33-6190582880b1", "totalSold": 4})
	if sum, err = importFile(e.ctx, e, "more.json", "["+string(changed)+","+goodProduct+"]"); err != nil || sum != (Summary{Inserted: 1, Updated: 1}) {
		t.Fatalf("third import: %+v, %v", sum, err)
	}
	if rows := e.rows(); strings.Count(rows, "\n") != 9 || !strings.Contains(rows, `"totalSold":4`) {
		t.Fatalf("rows after the third import:\n%s", rows)
	}
}

// TestImportErrorsChangeNothing: every kind of bad file leaves the store as it was, though
// the file's other products are valid (and would change or add rows).
func TestImportErrorsChangeNothing(t *testing.T) {
	e := newEnv(t, Config{}, Deps{})
	e.importDocs([]byte(goodProduct))
	before := e.rows()
	update := string(doc(t, map[string]any{"totalSold": 9}))
	add := string(doc(t, map[string]any{"id": "2b7c2c1e-5a0e-4c36-9d1f-2f4f6a3b9e10"}))
	for _, c := range []struct{ name, file, data string }{
		{"bad saleType", "a.json", "[" + update + "," + add + "," + string(doc(t, map[string]any{"id": "3b7c2c1e-5a0e-4c36-9d1f-2f4f6a3b9e10", "saleType": "RAFFLE"})) + "]"},
		{"missing required field", "a.json", "[" + update + "," + add + "," + string(doc(t, map[string]any{"id": "3b7c2c1e-5a0e-4c36-9d1f-2f4f6a3b9e10", "prices": nil})) + "]"},
		{"duplicate id", "a.json", "[" + add + "," + update + "," + add + "]"},
		{"bad date", "a.json", "[" + update + "," + string(doc(t, map[string]any{"id": "3b7c2c1e-5a0e-4c36-9d1f-2f4f6a3b9e10", "createdAt": "2026-11-31T00:00:00Z"})) + "]"},
		{"unknown field", "a.json", "[" + add + "," + string(doc(t, map[string]any{"price": "1.00"})) + "]"},
		{"bad JSON", "a.json", "[" + update + "," + add + ","},
		{"bad YAML", "a.yaml", strings.Replace(yamlProduct, "totalSold: 3", "totalSold: 9", 1) + "  - {id: [x\n"},
		{"YAML bad saleType", "a.yaml", strings.Replace(yamlProduct, "totalSold: 3", "totalSold: 9", 1) + strings.Replace(strings.Replace(yamlProduct, "0b7c", "4b7c", 1), "LIMITED_EDITION", "LIMITED", 1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			sum, err := importFile(e.ctx, e, c.file, c.data)
			var fe *FileError
			if !errors.As(err, &fe) || sum != (Summary{}) {
				t.Fatalf("import = %+v, %v; want a *FileError", sum, err)
			}
			if after := e.rows(); after != before {
				t.Errorf("the store changed:\n%s\nwas\n%s", after, before)
			}
		})
	}
}

// TestImportOneTransaction: a write that fails midway (a product the store refuses, made
// without Parse) undoes the writes before it.
func TestImportOneTransaction(t *testing.T) {
	e := newEnv(t, Config{}, Deps{})
	e.importDocs([]byte(goodProduct))
	before := e.rows()
	a, err := Parse(doc(t, map[string]any{"totalSold": 5}))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse(doc(t, map[string]any{"id": "2b7c2c1e-5a0e-4c36-9d1f-2f4f6a3b9e10"}))
	if err != nil {
		t.Fatal(err)
	}
	bad := *b
	bad.ID, bad.TotalSold = "3b7c2c1e-5a0e-4c36-9d1f-2f4f6a3b9e10", -1 // CHECK (total_sold >= 0)
	if _, err := Import(e.ctx, e.db, []*Product{a, b, &bad}); err == nil || !strings.Contains(err.Error(), "3b7c2c1e") {
		t.Fatalf("Import = %v, want the store's refusal of the third product", err)
	}
	if after := e.rows(); after != before {
		t.Errorf("the store changed:\n%s\nwas\n%s", after, before)
	}
}
