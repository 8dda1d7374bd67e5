package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outboxrelay/outboxrelay/internal/safetext"
	"github.com/outboxrelay/outboxrelay/internal/secretfmt"
	"github.com/outboxrelay/outboxrelay/outbox"
)

// Error is a delivery that did not go through: the endpoint answered
// with a status other than 2xx, no answer came, or the message could not
// be sent. Publish returns it wrapped in outbox.Permanent or
// outbox.Unavailable where the package documentation says so. Its text
// starts with what went wrong and ends with the endpoint, so that a last
// error cut at a column's width still shows the failure:
//
//	webhook: HTTP 503 Service Unavailable: retry after 30s (POST https://hooks.example.com)
//
// It never holds a secret, a Headers value, the URL's path or query, or
// more than a short, escaped excerpt of a response body (none at all if
// the excerpt quotes any of those).
type Error struct {
	// Endpoint is the target's scheme and host, never its path or query
	// (which may hold a token); "" if not known.
	Endpoint string
	// Message is the message's ID when the failure is the message's own
	// (it cannot be sent, URLFor failed, or, with URLFor, the endpoint
	// refused it); "" otherwise.
	Message string
	// StatusCode is the answer's HTTP status; 0 if none came.
	StatusCode int
	// RetryAfter is the wait the endpoint asked for with a Retry-After
	// header (seconds or an HTTP date), at most Config.MaxRetryAfter; 0
	// if it asked for none. RespectRetryAfter makes a retry policy wait
	// at least this long.
	RetryAfter time.Duration
	// Info says what went wrong.
	Info string
	// Err is the cause, if any: a round trip's error without the
	// request's URL, ErrUnsendable, ErrForbiddenAddress.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("webhook: ")
	b.WriteString(e.Info)
	if e.Err != nil {
		if text := e.Err.Error(); text != "" {
			b.WriteString(": ")
			b.WriteString(text)
		}
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, "; retry after %v", e.RetryAfter)
	}
	switch {
	case e.Message != "" && e.Endpoint != "":
		fmt.Fprintf(&b, " (message %s, POST %s)", quote(e.Message), e.Endpoint)
	case e.Message != "":
		fmt.Fprintf(&b, " (message %s)", quote(e.Message))
	case e.Endpoint != "":
		fmt.Fprintf(&b, " (POST %s)", e.Endpoint)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// RetryAfter returns the wait the endpoint asked for in the *Error that
// err is or wraps (Error.RetryAfter), and whether it asked for one.
func RetryAfter(err error) (time.Duration, bool) {
	var e *Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		return e.RetryAfter, true
	}
	return 0, false
}

// unsendable is the permanent ErrUnsendable error for the message id.
func unsendable(id, why string) error {
	return outbox.Permanent(&Error{Info: "message cannot be sent as stored: " + why, Message: id, Err: errUnsendableCause})
}

// errUnsendableCause wraps ErrUnsendable without repeating its text.
var errUnsendableCause = &quietError{err: ErrUnsendable}

// quietError is err for errors.Is, with no text of its own.
type quietError struct{ err error }

func (e *quietError) Error() string { return "" }
func (e *quietError) Unwrap() error { return e.err }

// endpointError classes e, a failure of the endpoint's set-up (no such
// host, a refused address or certificate, a redirect not followed,
// credentials refused, no endpoint at the URL) for the message id:
// Unavailable with the one Config.URL, which an operator fixes for every
// message; with Config.URLFor, Permanent and naming the message, since
// the endpoint is the message's own: one message's endpoint must not
// hold off the sink, and with it every other endpoint.
func (s *Sink) endpointError(e *Error, id string) error {
	if s.target == nil {
		e.Message = id
		return outbox.Permanent(e)
	}
	return outbox.Unavailable(e)
}

// statusError is the error for an answer other than 2xx to the request
// for message id.
func (s *Sink) statusError(u *url.URL, id string, resp *http.Response, body []byte) error {
	code := resp.StatusCode
	e := &Error{Endpoint: u.Scheme + "://" + u.Host, StatusCode: code, RetryAfter: s.retryAfter(resp.Header)}
	e.Info = strings.TrimSpace(fmt.Sprintf("HTTP %d %s", code, http.StatusText(code)))
	if excerpt := s.safe(string(body), u.String(), maxExcerpt); excerpt != "" {
		e.Info += ": " + excerpt
	}
	switch {
	case code >= 300 && code <= 399:
		e.Info = fmt.Sprintf("redirected (HTTP %d) to %s, which is not followed (%s)", code,
			safetext.Short(endpoint(resp.Header.Get("Location")), 80), s.redirectRule(code))
		return s.endpointError(e, id)
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		e.Info += " (credentials or signature refused)"
		return s.endpointError(e, id)
	case code == http.StatusNotFound || code == http.StatusMethodNotAllowed || code == http.StatusGone:
		e.Info += " (no endpoint at the URL)"
		return s.endpointError(e, id)
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		return e
	case code >= 400 && code <= 499:
		return outbox.Permanent(e)
	}
	return e
}

// redirectRule says why a redirect with code was not followed.
func (s *Sink) redirectRule(code int) string {
	switch {
	case s.cfg.MaxRedirects == 0:
		return "Config.MaxRedirects is 0: fix the URL"
	case code != http.StatusTemporaryRedirect && code != http.StatusPermanentRedirect:
		return "only 307 and 308 keep the POST and its body"
	}
	return "not allowed"
}

// redirectError is a redirect the sink refused to follow.
type redirectError struct{ why string }

func (e *redirectError) Error() string { return e.why }

// checkRedirect follows at most MaxRedirects 307s and 308s, never from
// https to http, and does not carry Config.Headers to another host.
func (s *Sink) checkRedirect(req *http.Request, via []*http.Request) error {
	code := 0
	if req.Response != nil {
		code = req.Response.StatusCode
	}
	switch {
	case s.cfg.MaxRedirects == 0 || (code != http.StatusTemporaryRedirect && code != http.StatusPermanentRedirect):
		return http.ErrUseLastResponse // the 3xx is the answer: see statusError
	case len(via) > s.cfg.MaxRedirects:
		return &redirectError{why: fmt.Sprintf("more than Config.MaxRedirects (%d) redirects", s.cfg.MaxRedirects)}
	case via[0].URL.Scheme == "https" && req.URL.Scheme != "https":
		return &redirectError{why: "a redirect from https to " + safetext.Short(req.URL.Scheme, 16)}
	case req.URL.User != nil:
		return &redirectError{why: "a redirect to a URL with user information"}
	}
	if req.URL.Host != via[0].URL.Host {
		for name := range s.static {
			req.Header.Del(name)
		}
	}
	return nil
}

// transportError is the error for a round trip that got no answer.
func (s *Sink) transportError(ctx context.Context, u *url.URL, id string, err error) error {
	cause := err
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		cause = ue.Err // url.Error prints the whole URL
	}
	e := &Error{Endpoint: u.Scheme + "://" + u.Host, Err: secretfmt.Cause(s.safe(cause.Error(), u.String(), maxCauseText), err, ErrForbiddenAddress)}
	var (
		redirect *redirectError
		dnsErr   *net.DNSError
		certErr  *tls.CertificateVerificationError
		authErr  x509.UnknownAuthorityError
		hostErr  x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	switch {
	case errors.Is(err, ErrForbiddenAddress):
		e.Info = "refused to connect"
		return s.endpointError(e, id)
	case errors.As(err, &redirect):
		e.Info = "redirect not followed"
		return s.endpointError(e, id)
	case errors.As(err, &certErr), errors.As(err, &authErr), errors.As(err, &hostErr), errors.As(err, &invalid):
		e.Info = "TLS certificate not accepted"
		return s.endpointError(e, id)
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		e.Info = "no such host"
		return s.endpointError(e, id)
	case errors.Is(ctx.Err(), context.Canceled):
		e.Info = "cancelled"
	case ctx.Err() != nil, isTimeout(err):
		e.Info = "timed out"
	default:
		e.Info = "request failed"
	}
	return e
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// retryAfter is the wait h's Retry-After asks for, within
// [0, MaxRetryAfter]; 0 for none or one that does not parse.
func (s *Sink) retryAfter(h http.Header) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	var d time.Duration
	if strings.Trim(v, "0123456789") == "" {
		secs, err := strconv.ParseFloat(v, 64)
		if err != nil || secs > math.MaxInt64/float64(time.Second) {
			return s.cfg.MaxRetryAfter
		}
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(s.cfg.Now())
	} else {
		return 0
	}
	return min(max(d, 0), s.cfg.MaxRetryAfter)
}

// How many characters of a response body, and of a round trip's error,
// an error shows.
const (
	maxExcerpt   = 100
	maxCauseText = 200
)

// safe is text from outside (a response body, a transport's or a user
// function's error), escaped and cut to n characters, or a note that it
// was withheld because it shows 16 bytes in a row of a hidden text or of
// extra (the request's URL).
func (s *Sink) safe(text, extra string, n int) string {
	text = strings.TrimSpace(text)
	if text == "" {
		return ""
	}
	hidden := s.hidden
	if extra != "" {
		if u, err := url.Parse(extra); err == nil {
			hidden = append(hidden[:len(hidden):len(hidden)], u.EscapedPath(), u.RawQuery)
		} else {
			hidden = append(hidden[:len(hidden):len(hidden)], extra)
		}
	}
	if shows(text, hidden) {
		return fmt.Sprintf("[%d bytes withheld: they quote a credential or the URL]", len(text))
	}
	if !utf8.ValidString(text) || len(text) > 4*n {
		text = strings.ToValidUTF8(text[:min(len(text), 4*n)], "\uFFFD")
	}
	return safetext.Short(text, n)
}

// leakRun is how many bytes of a hidden text in a row count as showing
// it (the whole text, if shorter, unless it is shorter than 6).
const leakRun = 16

// shows reports whether text holds leakRun bytes in a row of any of
// hidden.
func shows(text string, hidden []string) bool {
	for _, h := range hidden {
		if len(h) < 6 {
			continue
		}
		n := min(leakRun, len(h))
		for i := 0; i+n <= len(h); i++ {
			if strings.Contains(text, h[i:i+n]) {
				return true
			}
		}
	}
	return false
}

// quote is s quoted for an error text, cut to 64 characters.
func quote(s string) string {
	if utf8.RuneCountInString(s) <= 64 {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%.64q…", s)
}
