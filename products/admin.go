package products

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/store"
)

// AdminPath is the collection of the admin product API; AdminPath + "/{id}" is one product.
const AdminPath = "/v1/admin/products"

// AdminHandler serves the admin product API, for the admin listener (register it for
// AdminPath and AdminPath + "/"):
//
//	POST   /v1/admin/products       create (201; 409 when the id exists)
//	GET    /v1/admin/products/{id}  the product as stored (200; 404)
//	PUT    /v1/admin/products/{id}  create (201) or replace (200); the body's id must be {id}
//	DELETE /v1/admin/products/{id}  remove (204; 404)
//
// Every request needs Authorization: Bearer <token> with a token of products.admin.tokens
// (401 otherwise); with none configured the API is off (403). Answers are {"product": ...,
// "error": null}, errors the REST error object of api-objects.md: 400 invalid product, 405
// wrong method (with Allow), 413 body over products.admin.maxBodyBytes, 415 a Content-Type
// other than application/json (none is taken as JSON).
func (s *Service) AdminHandler() http.Handler {
	return http.HandlerFunc(s.serveAdmin)
}

func (s *Service) serveAdmin(w http.ResponseWriter, r *http.Request) {
	reqID := proxy.HTTPRequestID(r, func() string { return s.idPrefix + strconv.FormatUint(s.idSeq.Add(1), 36) })
	w.Header().Set("X-Request-Id", reqID)
	a := &adminCall{s: s, w: w, r: r, reqID: reqID}
	if err := a.serve(); err != nil {
		a.fail(err)
	}
}

type adminCall struct {
	s     *Service
	w     http.ResponseWriter
	r     *http.Request
	reqID string
	token string // the name of the admin token used
}

func (a *adminCall) serve() error {
	if a.s.tokens.Empty() {
		return proxy.Errorf(http.StatusForbidden, "the admin product API is off: no products.admin.tokens are configured")
	}
	var err error
	if a.token, err = a.s.tokens.Authenticate(a.w, a.r); err != nil {
		return err
	}
	id, item := strings.CutPrefix(a.r.URL.Path, AdminPath+"/")
	switch {
	case !item && a.r.URL.Path == AdminPath:
		if a.r.Method != http.MethodPost {
			return a.notAllowed(http.MethodPost)
		}
		return a.create()
	case item && id != "" && !strings.Contains(id, "/"):
		var serve func(id string) error
		switch a.r.Method {
		case http.MethodGet:
			serve = a.get
		case http.MethodPut:
			serve = a.put
		case http.MethodDelete:
			serve = a.delete
		default:
			return a.notAllowed(http.MethodGet, http.MethodPut, http.MethodDelete)
		}
		if uuidErr(id) != nil {
			return proxy.Errorf(http.StatusBadRequest, "id: %q is not a UUID", clip(id))
		}
		return serve(strings.ToLower(id))
	}
	return proxy.Errorf(http.StatusNotFound, "no such route")
}

func (a *adminCall) notAllowed(methods ...string) error {
	a.w.Header().Set("Allow", strings.Join(methods, ", "))
	return proxy.Errorf(http.StatusMethodNotAllowed, "method %s is not allowed here (allowed: %s)", clip(a.r.Method), strings.Join(methods, ", "))
}

// product reads the request's product: a JSON body within the size cap, parsed strictly.
func (a *adminCall) product() (*Product, error) {
	if ct := a.r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return nil, proxy.Errorf(http.StatusUnsupportedMediaType, "Content-Type must be application/json")
		}
	}
	tooLarge := proxy.Errorf(http.StatusRequestEntityTooLarge, "the body exceeds %d bytes (products.admin.maxBodyBytes)", a.s.maxBody)
	if a.r.ContentLength > a.s.maxBody {
		return nil, tooLarge
	}
	raw, err := io.ReadAll(http.MaxBytesReader(a.w, a.r.Body, a.s.maxBody))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, tooLarge
		}
		return nil, proxy.Errorf(http.StatusBadRequest, "reading the body: %v", err)
	}
	p, err := Parse(raw)
	if err != nil {
		return nil, proxy.Errorf(http.StatusBadRequest, "invalid product: %v", err)
	}
	return p, nil
}

func (a *adminCall) create() error {
	p, err := a.product()
	if err != nil {
		return err
	}
	row, err := p.row()
	if err != nil {
		return err
	}
	ctx := a.r.Context()
	err = a.s.db.Write(ctx, func(tx *store.DBTx) error { return tx.InsertProduct(ctx, row) })
	if errors.Is(err, store.ErrExists) {
		return proxy.Errorf(http.StatusConflict, "a product with id %s exists (PUT %s/%s replaces it)", p.ID, AdminPath, p.ID)
	}
	if err != nil {
		return err
	}
	a.logWrite("product created", p.ID)
	a.w.Header().Set("Location", AdminPath+"/"+p.ID)
	return a.answer(http.StatusCreated, row.Body)
}

func (a *adminCall) put(id string) error {
	p, err := a.product()
	if err != nil {
		return err
	}
	if p.ID != id {
		return proxy.Errorf(http.StatusBadRequest, "id: the body's id %s is not the path's %s", p.ID, id)
	}
	row, err := p.row()
	if err != nil {
		return err
	}
	ctx := a.r.Context()
	var res store.PutResult
	err = a.s.db.Write(ctx, func(tx *store.DBTx) error {
		var err error
		res, err = tx.PutProduct(ctx, row)
		return err
	})
	if err != nil {
		return err
	}
	switch res {
	case store.Inserted:
		a.logWrite("product created", id)
		a.w.Header().Set("Location", AdminPath+"/"+id)
		return a.answer(http.StatusCreated, row.Body)
	case store.Updated:
		a.logWrite("product replaced", id)
	}
	return a.answer(http.StatusOK, row.Body)
}

func (a *adminCall) get(id string) error {
	ctx := a.r.Context()
	var body []byte
	err := a.s.db.Read(ctx, func(tx *store.DBTx) error {
		var err error
		body, err = tx.Product(ctx, id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return proxy.Errorf(http.StatusNotFound, "no product with id %s", id)
	}
	if err != nil {
		return err
	}
	return a.answer(http.StatusOK, body)
}

func (a *adminCall) delete(id string) error {
	ctx := a.r.Context()
	err := a.s.db.Write(ctx, func(tx *store.DBTx) error { return tx.DeleteProduct(ctx, id) })
	if errors.Is(err, store.ErrNotFound) {
		return proxy.Errorf(http.StatusNotFound, "no product with id %s", id)
	}
	if err != nil {
		return err
	}
	a.logWrite("product deleted", id)
	a.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *adminCall) logWrite(msg, id string) {
	a.s.log.Info(msg, zap.String("req_id", a.reqID), zap.String("product", id), zap.String("admin_token", a.token))
}

// answer writes {"product": body, "error": null}.
func (a *adminCall) answer(status int, body []byte) error {
	out := make([]byte, 0, len(body)+32)
	out = append(out, `{"product":`...)
	out = append(out, body...)
	out = append(out, `,"error":null}`...)
	a.w.Header().Set("Content-Type", "application/json")
	a.w.WriteHeader(status)
	_, _ = a.w.Write(out)
	return nil
}

// fail writes the REST error object of err: its status and message for a *proxy.HTTPError,
// else 500 with the cause logged (a canceled request only at debug).
func (a *adminCall) fail(err error) {
	var he *proxy.HTTPError
	if !errors.As(err, &he) {
		lvl := zap.ErrorLevel
		if errors.Is(err, context.Canceled) {
			lvl = zap.DebugLevel
		}
		if ce := a.s.log.Check(lvl, "admin product API: internal error"); ce != nil {
			ce.Write(zap.String("req_id", a.reqID), zap.String("method", a.r.Method), zap.Error(err))
		}
		he = proxy.Errorf(http.StatusInternalServerError, "internal error")
	}
	proxy.WriteHTTPError(a.w, a.reqID, he)
}
