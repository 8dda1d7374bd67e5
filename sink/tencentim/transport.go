package tencentim

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/outboxrelay/outboxrelay/internal/safetext"
	"github.com/outboxrelay/outboxrelay/internal/secretfmt"
)

// maxResponseBytes bounds how much of a response is read.
const maxResponseBytes = 64 << 10

// apiResponse is the envelope every REST API answers with; HTTP 200 even
// when the call failed.
type apiResponse struct {
	ActionStatus string `json:"ActionStatus"`
	ErrorCode    int    `json:"ErrorCode"`
	ErrorInfo    string `json:"ErrorInfo"`
}

// do makes one request signed with sig. Every error it returns is an
// *Error (possibly marked permanent) that holds no secret: no URL, no
// UserSig, no key, no response body.
func (s *Sink) do(ctx context.Context, api, sig string, body []byte, trace string) error {
	q := url.Values{}
	q.Set("sdkappid", strconv.Itoa(s.cfg.SDKAppID))
	q.Set("identifier", s.cfg.AdminIdentifier)
	q.Set("usersig", sig)
	q.Set("random", strconv.FormatUint(uint64(randomUint32()), 10))
	q.Set("contenttype", "json")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.BaseURL+"/v4/"+api+"?"+q.Encode(), bytes.NewReader(body))
	if err != nil {
		return &Error{API: api, Info: "cannot build the request"}
	}
	req.Header.Set("Content-Type", "application/json")
	if trace != "" {
		req.Header.Set("Traceparent", trace)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return s.transportError(api, sig, err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBytes)) // keep the connection reusable
		_ = resp.Body.Close()
	}()
	if resp.StatusCode != http.StatusOK {
		return s.interpret(api, sig, resp.StatusCode, nil)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return s.transportError(api, sig, err)
	}
	return s.interpret(api, sig, resp.StatusCode, data)
}

// interpret turns a response into nil or the error Publish returns: the
// HTTP status first, then the body's ActionStatus and ErrorCode.
func (s *Sink) interpret(api, sig string, status int, body []byte) error {
	if status != http.StatusOK {
		return &Error{API: api, HTTPStatus: status, Info: http.StatusText(status)}
	}
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil || r.ActionStatus == "" {
		return &Error{API: api, HTTPStatus: status, Info: fmt.Sprintf("unparseable response of %d bytes", len(body))}
	}
	if r.ActionStatus == "OK" && r.ErrorCode == 0 {
		return nil
	}
	if r.ErrorCode == 0 {
		return &Error{API: api, HTTPStatus: status, Info: "ActionStatus " + safetext.Truncate(s.scrub(r.ActionStatus, sig), 32) + " without an ErrorCode"}
	}
	return apiError(api, r.ErrorCode, s.scrub(r.ErrorInfo, sig))
}

// transportError describes a failed round trip without the request URL
// (which carries the UserSig): net/http's *url.Error prints it whole, and
// a custom transport's error may quote it too. Err keeps only the
// scrubbed text and the sentinels (see secretfmt.CauseError).
func (s *Sink) transportError(api, sig string, err error) error {
	cause := err
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		cause = ue.Err
	}
	text := safetext.Truncate(s.scrub(cause.Error(), sig), maxInfoBytes)
	info := text
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		info = "timed out"
	case errors.Is(err, context.Canceled):
		info = "canceled"
	}
	return &Error{API: api, Info: info, Err: secretfmt.Cause(text, err)}
}

// scrub removes from text that came from outside every form of the
// secret key, of the UserSig sig and of the signer's current and
// previous UserSigs, and every usersig parameter and query string (see
// scrub in redact.go).
func (s *Sink) scrub(text, sig string) string {
	return scrub(text, s.signer.redactions(sig))
}

// randomUint32 is the per-request random query parameter.
func randomUint32() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return binary.BigEndian.Uint32(b[:])
}
