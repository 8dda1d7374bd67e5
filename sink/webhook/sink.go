package webhook

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// Sink POSTs each message to its endpoint, signed as Standard Webhooks
// says. It is safe for concurrent use. Close it when done, to close its
// idle connections. Sink and *Sink print, log and marshal without the
// secrets, the Headers' values or the URL's path and query (see String).
type Sink struct {
	cfg       Config  // without Secrets and Headers, which signer and static hold
	signer    *signer // signs with the keys of Config.Secrets
	static    staticHeaders
	target    *url.URL // Config.URL parsed; nil with URLFor
	targetURL string   // target as a string; "" with URLFor
	guard     guard
	client    *http.Client
	transport *http.Transport
	// hidden are texts no error may show a run of: the secrets, the
	// Headers' values, the path and query of Config.URL.
	hidden []string
}

var _ outbox.Sink = (*Sink)(nil)

// New returns a sink for cfg, or an error naming each missing or
// malformed field (never a secret's value). It does not connect.
func New(cfg Config) (*Sink, error) {
	cfg = cfg.withDefaults()
	keys, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	s := &Sink{signer: newSigner(keys), static: cfg.canonicalHeaders(), guard: guard{allow: cfg.AllowNetworks}}
	s.hidden = append(s.hidden, cfg.Secrets...)
	for _, v := range cfg.Headers {
		s.hidden = append(s.hidden, v)
	}
	if cfg.URL != "" {
		s.target, _ = url.Parse(cfg.URL) // validated
		s.targetURL = s.target.String()
		s.hidden = append(s.hidden, s.target.EscapedPath(), s.target.RawQuery)
	}
	cfg.Secrets, cfg.Headers = nil, nil
	s.cfg = cfg
	s.transport = &http.Transport{
		Proxy:                  nil, // a proxy would connect past the guard
		DialContext:            s.guard.dialer(cfg).DialContext,
		TLSClientConfig:        cfg.TLSConfig.Clone(),
		TLSHandshakeTimeout:    cfg.ConnectTimeout,
		ResponseHeaderTimeout:  cfg.ResponseHeaderTimeout,
		MaxResponseHeaderBytes: 64 << 10,
		MaxIdleConns:           256,
		MaxIdleConnsPerHost:    64,
		IdleConnTimeout:        90 * time.Second,
		DisableCompression:     true, // the body is hardly read
		ForceAttemptHTTP2:      true,
	}
	s.client = &http.Client{Transport: s.transport, CheckRedirect: s.checkRedirect}
	return s, nil
}

// Close closes the sink's idle connections. Publish may still be
// called after it (and opens new ones).
func (s *Sink) Close() error {
	s.transport.CloseIdleConnections()
	return nil
}

// Request returns the request Publish sends for msg, with ctx, or the
// permanent error Publish returns without sending anything: the
// endpoint (Config.URL, or Config.URLFor's answer, checked as URL must
// be); the payload as the body; Content-Type, User-Agent, the
// Config.Headers; HeaderID, HeaderTimestamp (now) and HeaderSignature;
// HeaderEventType and HeaderEventKey; and the message's own headers,
// but the reserved ones (ReservedHeader). Producers may call it before
// Enqueue to refuse a message this sink could never deliver.
func (s *Sink) Request(ctx context.Context, msg outbox.Message) (*http.Request, error) {
	req, _, err := s.request(ctx, msg)
	return req, err
}

// request is Request, and the names of the reserved headers left out.
func (s *Sink) request(ctx context.Context, msg outbox.Message) (_ *http.Request, dropped []string, err error) {
	u, err := s.endpointOf(msg)
	if err != nil {
		return nil, nil, err
	}
	if s.cfg.MaxPayloadBytes > 0 && len(msg.Payload) > s.cfg.MaxPayloadBytes {
		return nil, nil, unsendable(msg.ID, fmt.Sprintf("payload of %d bytes, over MaxPayloadBytes (%d)", len(msg.Payload), s.cfg.MaxPayloadBytes))
	}
	raw := s.targetURL
	if raw == "" {
		raw = u.String()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, raw, bytes.NewReader(msg.Payload))
	if err != nil {
		return nil, nil, outbox.Permanent(&Error{Info: "cannot make a request of the message", Message: msg.ID, Endpoint: u.Scheme + "://" + u.Host})
	}
	h := req.Header
	// One backing array for every header's value: a request costs one
	// allocation for them, not one per header.
	values := make([]string, 0, len(msg.Headers)+len(s.static)+7)
	set := func(name, value string) {
		values = append(values, value)
		h[name] = values[len(values)-1 : len(values) : len(values)]
	}
	if dropped, err = s.messageHeaders(set, msg); err != nil {
		return nil, nil, err
	}
	for name, value := range s.static {
		set(name, value)
	}
	id := EncodeHeaderValue(msg.ID)
	ts := s.cfg.Now().Unix()
	set(HeaderID, id)
	set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	set(HeaderSignature, s.signer.signatures(id, ts, msg.Payload))
	set(HeaderEventType, EncodeHeaderValue(msg.Type))
	if msg.Key != "" {
		set(HeaderEventKey, EncodeHeaderValue(msg.Key))
	}
	set("Content-Type", s.cfg.ContentType)
	set("User-Agent", s.cfg.UserAgent)
	if n := headerBytes(h); n > MaxHeaderBytes {
		return nil, nil, unsendable(msg.ID, fmt.Sprintf("headers of %d bytes, over MaxHeaderBytes (%d)", n, MaxHeaderBytes))
	}
	return req, dropped, nil
}

// endpointOf is msg's endpoint, or the permanent error for it.
func (s *Sink) endpointOf(msg outbox.Message) (*url.URL, error) {
	if s.target != nil {
		return s.target, nil
	}
	raw, err := s.cfg.URLFor(msg)
	if err != nil {
		return nil, outbox.Permanent(&Error{Info: "URLFor failed: " + s.safe(err.Error(), raw, maxCauseText), Message: msg.ID})
	}
	u, err := parseTarget(raw, s.guard)
	if err != nil {
		return nil, outbox.Permanent(&Error{Endpoint: endpoint(raw), Info: "URLFor's URL is refused", Message: msg.ID, Err: err})
	}
	return u, nil
}

// Publish POSTs msg as Request makes it, and reads at most
// MaxResponseBytes of the answer. A 2xx answer is a delivery; every
// other outcome is an *Error, classed as the package documentation
// says. ctx bounds the whole call (the worker's PublishTimeout), and
// each step has its own bound besides (Config.ConnectTimeout,
// ResponseHeaderTimeout, BodyTimeout).
func (s *Sink) Publish(ctx context.Context, msg outbox.Message) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, dropped, err := s.request(ctx, msg)
	if err != nil {
		return err
	}
	if len(dropped) > 0 {
		s.cfg.Logger.DebugContext(ctx, "webhook: reserved headers not forwarded; the message is sent without them",
			slog.String("event_id", msg.ID), slog.Any("headers", dropped))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return s.transportError(ctx, req.URL, msg.ID, err)
	}
	// The body is read under BodyTimeout, and only its start.
	slow := time.AfterFunc(s.cfg.BodyTimeout, cancel)
	body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes))
	slow.Stop()
	_ = resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return nil // delivered, however the body went
	}
	return s.statusError(req.URL, msg.ID, resp, body)
}
