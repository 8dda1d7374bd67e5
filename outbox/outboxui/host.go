package outboxui

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/outboxrelay/outboxrelay/internal/safetext"
)

// The Host check (Options.AllowedHosts). A web page on a name its
// author controls can resolve that name to 127.0.0.1 (DNS rebinding):
// the browser then sends the page's requests to the dashboard, treats
// the answers as the page's own origin and lets its script read them,
// CSRF token and all. The one thing such a request cannot hide is its
// Host header, which names the attacker's name. So the handler answers
// only to the names it was told it is served under, and to loopback.

// maxHostLength bounds a host name (RFC 1035: 253 characters, without
// the trailing dot).
const maxHostLength = 253

// hostSet is the hosts a handler answers to, besides loopback: names
// normalised by normalName, addresses unmapped.
type hostSet struct {
	names map[string]bool
	addrs map[netip.Addr]bool
}

// newHostSet parses Options.AllowedHosts; the error names the entry.
func newHostSet(entries []string) (hostSet, error) {
	hs := hostSet{names: map[string]bool{}, addrs: map[netip.Addr]bool{}}
	var errs []error
	for i, e := range entries {
		name, addr, err := parseHostEntry(e)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("outboxui: AllowedHosts[%d] %s: %w", i, quoteCut(e), err))
		case addr.IsValid():
			hs.addrs[addr] = true
		default:
			hs.names[name] = true
		}
	}
	return hs, errors.Join(errs...)
}

// CheckHost reports whether entry may be one of Options.AllowedHosts:
// nil, or an error that names it and says what is wrong. Services use it
// to check their configuration before building the handler.
func CheckHost(entry string) error {
	if _, _, err := parseHostEntry(entry); err != nil {
		return fmt.Errorf("outboxui: host %s: %w", quoteCut(entry), err)
	}
	return nil
}

// quoteCut is an entry as an error shows it: quoted, every byte that is
// not printable escaped, cut after 80 bytes.
func quoteCut(s string) string {
	if len(s) > 80 {
		return strconv.Quote(s[:80]) + "…"
	}
	return strconv.Quote(s)
}

// parseHostEntry reads an entry of AllowedHosts: an IP address (an IPv6
// one with or without brackets), or a host name, which it returns
// normalised. No port, no wildcard, no zone.
func parseHostEntry(e string) (string, netip.Addr, error) {
	switch {
	case e == "":
		return "", netip.Addr{}, errors.New("is empty")
	case len(e) > maxHostLength+2:
		return "", netip.Addr{}, fmt.Errorf("is longer than %d characters", maxHostLength)
	case strings.Contains(e, "*"):
		return "", netip.Addr{}, errors.New("wildcards are not supported: list every name the dashboard is opened under")
	}
	if addr, bracketed, ok := parseAddr(e); ok {
		switch {
		case addr.Zone() != "":
			return "", netip.Addr{}, errors.New("an IPv6 zone is not supported (browsers do not send one)")
		case bracketed && !addr.Is6():
			return "", netip.Addr{}, errors.New("only an IPv6 address goes in brackets")
		}
		return "", addr.Unmap(), nil
	}
	if strings.Contains(e, ":") || strings.HasPrefix(e, "[") {
		return "", netip.Addr{}, errors.New("must be a host name or an IP address, without a port (every port is served)")
	}
	name, ok := normalName(e)
	if !ok {
		return "", netip.Addr{}, errors.New("is not a host name: letters, digits, '-' and '_' in dot-separated labels of 1 to 63, " +
			"the last not all digits; an internationalised name in its xn-- form")
	}
	return name, netip.Addr{}, nil
}

// parseAddr reads s as an IP address, an IPv6 one with or without
// brackets, and says whether it had them.
func parseAddr(s string) (addr netip.Addr, bracketed, ok bool) {
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		s, bracketed = s[1:len(s)-1], true
	}
	addr, err := netip.ParseAddr(s)
	return addr, bracketed, err == nil
}

// normalName returns host name s in lower case without its trailing dot,
// and whether it is one: ASCII letters, digits, '-' and '_' (Docker and
// Kubernetes names hold them) in labels of 1 to 63, the last not all
// digits (a browser reads "127.1" or "1.2.3.4.5" as an address, or
// refuses it).
func normalName(s string) (string, bool) {
	s = strings.ToLower(strings.TrimSuffix(s, "."))
	if s == "" || len(s) > maxHostLength {
		return "", false
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if len(l) == 0 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return "", false
		}
		for i := 0; i < len(l); i++ {
			if c := l[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", false
			}
		}
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return "", false
	}
	return s, true
}

// allows reports whether the handler answers to a request with Host
// header host: loopback (localhost, 127.0.0.0/8, ::1) or an allowed
// host, on any port. Anything malformed is refused.
func (hs hostSet) allows(host string) bool {
	h, ok := hostOnly(host)
	if !ok {
		return false
	}
	if addr, bracketed, ok := parseAddr(h); ok {
		if addr.Zone() != "" || bracketed != addr.Is6() {
			return false
		}
		addr = addr.Unmap()
		return addr.IsLoopback() || hs.addrs[addr]
	}
	name, ok := normalName(h)
	return ok && (name == "localhost" || hs.names[name])
}

// hostOnly is a Host header without its port: "name", "1.2.3.4" or
// "[v6]". It refuses a header that is too long, holds anything but
// printable ASCII, or has a port that is not a number.
func hostOnly(host string) (string, bool) {
	if host == "" || len(host) > maxHostLength+len("[]:65535") {
		return "", false
	}
	for i := 0; i < len(host); i++ {
		if host[i] <= ' ' || host[i] >= 0x7f {
			return "", false
		}
	}
	h, port := host, ""
	if strings.HasPrefix(host, "[") {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return "", false
		}
		h, port = host[:end+1], host[end+1:]
	} else if i := strings.IndexByte(host, ':'); i >= 0 {
		h, port = host[:i], host[i:]
	}
	if port != "" {
		digits := strings.TrimPrefix(port, ":")
		if digits == port || digits == "" || len(digits) > 5 || strings.Trim(digits, "0123456789") != "" {
			return "", false
		}
	}
	return h, h != "" && h != "[]"
}

// misdirected answers a request whose Host the handler does not serve.
// The body does not repeat the Host; the log line shows it escaped and
// cut.
func (h *Handler) misdirected(w http.ResponseWriter, r *http.Request) {
	h.opts.Logger.WarnContext(r.Context(), "outboxui: request for a host this dashboard does not serve (DNS rebinding?), refused",
		"host", safetext.Short(r.Host, 100), "method", r.Method, "path", safetext.Short(r.URL.Path, 200), "remote_addr", r.RemoteAddr)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusMisdirectedRequest)
	_, _ = w.Write([]byte("421 misdirected request: this dashboard answers to loopback and to the host names it is configured with only\n"))
}
