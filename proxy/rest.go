package proxy

import (
	"encoding/json"
	"net/http"

	"github.com/valyala/fasthttp"
)

// RESTError is the `error` member of REST responses (shared/reference/api-objects.md).
type RESTError struct {
	Code    int    `json:"code"`
	Status  string `json:"status"`
	Request string `json:"request"`
	Message string `json:"message"`
}

// writeRESTError answers with {"error": {...}} and the HTTP status.
func writeRESTError(ctx *fasthttp.RequestCtx, status int, reqID, message string) {
	body, _ := json.Marshal(struct {
		Error RESTError `json:"error"`
	}{RESTError{Code: status, Status: http.StatusText(status), Request: reqID, Message: message}})
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}
