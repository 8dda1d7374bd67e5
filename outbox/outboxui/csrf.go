package outboxui

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
)

// sessionCookie holds a random session ID; the CSRF token of a session
// is an HMAC of it under the handler's key, so the handler keeps no
// session state.
const sessionCookie = "outboxui_session"

// session returns the request's session ID, setting a new cookie when
// the request has none (or a malformed one).
func (h *Handler) session(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(sessionCookie); err == nil && validSessionID(c.Value) {
		return c.Value
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	id := hex.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: id, Path: h.opts.Path, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
	return id
}

func validSessionID(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == 32
}

// token is the CSRF token of session id.
func (h *Handler) token(id string) string {
	m := hmac.New(sha256.New, h.csrfKey)
	m.Write([]byte("outboxui csrf\x00" + id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// errForbidden is a POST that failed the CSRF or origin check.
var errForbidden = errors.New("the form is stale or came from another site: reload the page and try again")

// checkPost checks that a POST comes from a page of this handler: from
// the same origin (Origin, else Sec-Fetch-Site, when the browser sends
// them) and with the session's CSRF token.
func (h *Handler) checkPost(r *http.Request) error {
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return errForbidden
		}
	} else if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" {
		return errForbidden
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil || !validSessionID(c.Value) {
		return errForbidden
	}
	if !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(h.token(c.Value))) {
		return errForbidden
	}
	return nil
}
