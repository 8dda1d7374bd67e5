package webhook

import (
	"cmp"
	"crypto/tls"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/internal/optcheck"
	"github.com/outboxrelay/outboxrelay/internal/secretfmt"
	"github.com/outboxrelay/outboxrelay/outbox"
)

// Defaults and limits of Config.
const (
	// DefaultConnectTimeout bounds connecting, TLS handshake included.
	DefaultConnectTimeout = 5 * time.Second
	// DefaultResponseHeaderTimeout bounds the wait for the response's
	// headers once the request is sent.
	DefaultResponseHeaderTimeout = 15 * time.Second
	// DefaultBodyTimeout bounds reading the response body (at most
	// MaxResponseBytes of it).
	DefaultBodyTimeout = 5 * time.Second
	// DefaultMaxPayloadBytes bounds the payload, which is the request
	// body.
	DefaultMaxPayloadBytes = 1 << 20
	// DefaultMaxRetryAfter caps the wait a Retry-After header asks for
	// (Error.RetryAfter).
	DefaultMaxRetryAfter = 10 * time.Minute
	// DefaultContentType is the request's Content-Type.
	DefaultContentType = "application/json"
	// DefaultUserAgent is the request's User-Agent.
	DefaultUserAgent = "outboxrelay-webhook/1"
	// MaxRedirects bounds Config.MaxRedirects.
	MaxRedirects = 10
	// MaxSecrets bounds Config.Secrets: each signs every request.
	MaxSecrets = 10
	// MaxResponseBytes is how much of a response body the sink reads:
	// enough to keep the connection for the next request, and for a
	// short excerpt in an error; the rest is not read.
	MaxResponseBytes = 4 << 10
)

// Config configures a Sink. URL (or URLFor) and Secrets are required;
// every other field has a default, which the zero value means.
type Config struct {
	// URL is the endpoint every message is POSTed to: http or https,
	// with a host, and no user information or fragment. Required unless
	// URLFor is set. Its path and query may hold a token (many endpoints
	// work so): errors, logs and printouts show only its scheme and host.
	URL string
	// URLFor, if set, chooses each message's endpoint instead of URL
	// (a tenant's endpoint, say). An error from it, or a URL that is not
	// valid as URL must be, fails the message permanently, and so does
	// an endpoint that refuses it for a reason of its set-up (a host that
	// does not resolve, a refused address or certificate, a redirect not
	// followed, 401, 403, 404, 405, 410), which with URL would be
	// Unavailable: one message's endpoint never holds off the sink for
	// the others.
	URLFor func(outbox.Message) (string, error)
	// Secrets sign every request (Standard Webhooks: HeaderSignature
	// holds one signature per secret). Each is "whsec_" and a key of
	// MinSecretBytes to MaxSecretBytes bytes in base64 (NewSecret makes
	// one). Required: 1 to MaxSecrets. To rotate, add the new secret,
	// let receivers learn it, then drop the old one.
	Secrets []string
	// Headers are sent with every request (an Authorization or API key
	// header, say): names are HTTP tokens, values have no control
	// characters. Their values are treated as secrets: never printed,
	// logged or shown in an error, and not sent on to another host by a
	// redirect. Defaults to none.
	Headers map[string]string
	// ContentType is the request's Content-Type. Defaults to
	// DefaultContentType.
	ContentType string
	// UserAgent is the request's User-Agent. Defaults to
	// DefaultUserAgent.
	UserAgent string
	// AllowNetworks are the networks the sink may connect to although
	// they are special (loopback, private, link-local, multicast,
	// unspecified, carrier-grade NAT and other special-purpose ranges,
	// which it refuses to guard against SSRF). A URL whose host is a
	// refused address fails New; every address the sink connects to is
	// checked when it connects, after the name was resolved, so a name
	// that resolves to a refused address, now or later (DNS rebinding),
	// is refused too. Defaults to none: public addresses only. Tests on
	// loopback allow 127.0.0.0/8 and ::1/128; an endpoint inside a
	// private network allows that network.
	AllowNetworks []netip.Prefix
	// MaxRedirects is how many redirects a request follows. Defaults to
	// 0: a redirect is not followed and fails as Unavailable (the
	// endpoint moved: fix URL). Only 307 and 308, which keep the method
	// and body, are followed; never from https to http; and each target
	// passes AllowNetworks. At most MaxRedirects (10).
	MaxRedirects int
	// ConnectTimeout bounds connecting, TLS handshake included. Defaults
	// to DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for the response's headers
	// once the request was sent. Defaults to
	// DefaultResponseHeaderTimeout.
	ResponseHeaderTimeout time.Duration
	// BodyTimeout bounds reading the response body. A 2xx answer counts
	// as delivered even if its body is slow (the connection is then
	// closed). Defaults to DefaultBodyTimeout.
	BodyTimeout time.Duration
	// MaxPayloadBytes bounds the payload; a larger message fails
	// permanently (ErrUnsendable) before anything is sent. Defaults to
	// DefaultMaxPayloadBytes; negative means no bound.
	MaxPayloadBytes int
	// MaxRetryAfter caps Error.RetryAfter. Defaults to
	// DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration
	// TLSConfig is the TLS configuration of https requests (a private
	// CA, a client certificate). Defaults to the system's roots.
	TLSConfig *tls.Config
	// Logger receives debug lines about headers left out. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock of HeaderTimestamp and of Retry-After dates.
	// Defaults to time.Now.
	Now func() time.Time
}

// withDefaults returns c with defaults filled in.
func (c Config) withDefaults() Config {
	c.ContentType = cmp.Or(c.ContentType, DefaultContentType)
	c.UserAgent = cmp.Or(c.UserAgent, DefaultUserAgent)
	c.ConnectTimeout = optcheck.Positive(c.ConnectTimeout, DefaultConnectTimeout)
	c.ResponseHeaderTimeout = optcheck.Positive(c.ResponseHeaderTimeout, DefaultResponseHeaderTimeout)
	c.BodyTimeout = optcheck.Positive(c.BodyTimeout, DefaultBodyTimeout)
	c.MaxPayloadBytes = cmp.Or(c.MaxPayloadBytes, DefaultMaxPayloadBytes)
	c.MaxRetryAfter = optcheck.Positive(c.MaxRetryAfter, DefaultMaxRetryAfter)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// validate checks a config with defaults filled in, and returns the
// secrets' keys. Messages name the field, and the value unless it is a
// secret.
func (c Config) validate() ([][]byte, error) {
	problems := optcheck.New("webhook")
	bad := problems.Addf
	switch {
	case c.URL == "" && c.URLFor == nil:
		bad("URL: required (or URLFor)")
	case c.URL != "" && c.URLFor != nil:
		bad("URL %q: set URL or URLFor, not both", endpoint(c.URL))
	case c.URL != "":
		if _, err := parseTarget(c.URL, guard{allow: c.AllowNetworks}); err != nil {
			bad("URL %q: %w", endpoint(c.URL), err) // errors.Is sees ErrForbiddenAddress
		}
	}
	var keys [][]byte
	switch {
	case len(c.Secrets) == 0:
		bad("Secrets: required (at least one whsec_ secret; NewSecret makes one)")
	case len(c.Secrets) > MaxSecrets:
		bad("Secrets: %d, at most MaxSecrets (%d)", len(c.Secrets), MaxSecrets)
	}
	for i, secret := range c.Secrets {
		key, err := parseSecret(secret)
		if err != nil {
			bad("Secrets[%d]: %v", i, err)
		}
		keys = append(keys, key)
	}
	for name, value := range c.Headers {
		switch {
		case nameFault(name) != "":
			bad("Headers: name %s %s", quote(name), nameFault(name))
		case ReservedHeader(name):
			bad("Headers: %s is the sink's own or the transport's (see ReservedHeader)", quote(name))
		case valueFault(value) != "":
			bad("Headers: the value of %s %s", quote(name), valueFault(value))
		}
	}
	if c.MaxRedirects < 0 || c.MaxRedirects > MaxRedirects {
		bad("MaxRedirects %d: must be 0 to %d", c.MaxRedirects, MaxRedirects)
	}
	if strings.ContainsAny(c.ContentType, "\r\n") || valueFault(c.ContentType) != "" {
		bad("ContentType %q: %s", c.ContentType, valueFault(c.ContentType))
	}
	if valueFault(c.UserAgent) != "" {
		bad("UserAgent %q: %s", c.UserAgent, valueFault(c.UserAgent))
	}
	for i, p := range c.AllowNetworks {
		if !p.IsValid() {
			bad("AllowNetworks[%d] %v: not a valid network", i, p)
		}
	}
	return keys, problems.Err()
}

// parseTarget checks raw as URL must be: http or https, a host, no user
// information, no fragment; an address given as the host must pass g.
// Errors never show the path or query.
func parseTarget(raw string, g guard) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, errors.New("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errors.New("must be an http or https URL")
	case u.Host == "" || u.Opaque != "":
		return nil, errors.New("must have a host")
	case u.User != nil:
		return nil, errors.New("must not hold user information (use Headers for credentials)")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return nil, errors.New("must not have a fragment")
	}
	if addr, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil {
		if err := g.check(addr); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// endpoint is raw's scheme and host, and nothing else: its path, query
// and user information may hold a credential.
func endpoint(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" && u.Host != "" {
		return u.Scheme + "://" + u.Host
	}
	p := secretfmt.SplitURL(raw)
	host, _, _ := strings.Cut(p.HostPath, "/")
	return p.Scheme + host
}

// canonicalHeaders returns c.Headers with canonical names.
func (c Config) canonicalHeaders() staticHeaders {
	h := make(staticHeaders, len(c.Headers))
	for name, value := range c.Headers {
		h[http.CanonicalHeaderKey(name)] = value
	}
	return h
}
