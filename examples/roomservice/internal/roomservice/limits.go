package roomservice

import (
	"mime"
	"net/http"
	"regexp"
	"time"
)

// retryAfterSeconds is the Retry-After an overloaded instance answers
// with: long enough for its in-flight commands (milliseconds each) to
// finish, short enough that a retry soon finds a free slot.
const retryAfterSeconds = "1"

// limitInFlight answers 503 with Retry-After to requests beyond max
// handled at once, instead of letting them queue on MySQL's pool until
// every client times out. It never waits: a full instance says so at
// once, and the client (or the load balancer) retries elsewhere.
func limitInFlight(max int, next http.Handler) http.Handler {
	slots := make(chan struct{}, max)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
		default:
			w.Header().Set("Retry-After", retryAfterSeconds)
			writeError(w, &apiError{Status: http.StatusServiceUnavailable, Code: "overloaded",
				Message: "too many requests in flight; retry after " + retryAfterSeconds + "s"})
			return
		}
		defer func() { <-slots }()
		next.ServeHTTP(w, r)
	})
}

// requireJSON answers 415 to a POST whose Content-Type is not
// application/json (parameters such as charset=utf-8 are allowed). A
// browser may post text/plain or a form cross-site without a CORS
// preflight; application/json always needs one, so this keeps other
// sites' pages from issuing commands with a visitor's network position.
func requireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if err != nil || mt != "application/json" {
				writeError(w, &apiError{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
					Message: "Content-Type must be application/json"})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// requestIDRE is what an X-Request-Id may be. The ID is echoed in the
// response, written to logs and carried in every event's payload to the
// room's members, so it is kept to characters that are inert in headers,
// HTML, JSON and log lines.
var requestIDRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// withRequestID makes sure every response carries a safe X-Request-Id:
// the caller's when it matches requestIDRE, a new one otherwise.
// Handlers read it back from the response header (requestID).
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !requestIDRE.MatchString(id) {
			id = newEventID(time.Now())
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r)
	})
}

// requestID is the request's X-Request-Id as withRequestID settled it.
func requestID(w http.ResponseWriter) string { return w.Header().Get("X-Request-Id") }
