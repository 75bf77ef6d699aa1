package products

import (
	"context"
	"fmt"

	"github.com/web3gate/web3gate/store"
)

// Summary counts what an import did.
type Summary struct {
	Inserted, Updated, Unchanged int
}

func (s Summary) String() string {
	return fmt.Sprintf("%d inserted, %d updated, %d unchanged", s.Inserted, s.Updated, s.Unchanged)
}

// Import writes parsed products (ParseFile) in one store transaction, each inserted or
// replacing the product with its id: all of them or, on an error, none.
func Import(ctx context.Context, db *store.DB, ps []*Product) (Summary, error) {
	rows := make([]*store.ProductRow, len(ps))
	for i, p := range ps {
		r, err := p.row()
		if err != nil {
			return Summary{}, err
		}
		rows[i] = r
	}
	var sum Summary
	err := db.Write(ctx, func(tx *store.DBTx) error {
		sum = Summary{}
		for _, r := range rows {
			res, err := tx.PutProduct(ctx, r)
			if err != nil {
				return err
			}
			switch res {
			case store.Inserted:
				sum.Inserted++
			case store.Updated:
				sum.Updated++
			case store.Unchanged:
				sum.Unchanged++
			}
		}
		return nil
	})
	if err != nil {
		return Summary{}, fmt.Errorf("import: %w", err)
	}
	return sum, nil
}
