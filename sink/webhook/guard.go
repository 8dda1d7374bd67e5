package webhook

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// ErrForbiddenAddress is wrapped by the error of a request whose target
// is or resolved to an address the sink does not connect to (see
// Config.AllowNetworks): a loopback, private, link-local, multicast,
// unspecified or otherwise special address. With a fixed Config.URL the
// error is Unavailable (an operator fixes the DNS or the allow-list);
// with Config.URLFor it is Permanent (the message's target is refused).
// New's error wraps it too, for a Config.URL whose host is such an
// address.
var ErrForbiddenAddress = errors.New("webhook: the target's address is not allowed")

// forbiddenNetworks are special-purpose ranges that netip's methods
// (loopback, private, link-local, multicast, unspecified) do not cover
// and that no public webhook endpoint lives in.
var forbiddenNetworks = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),      // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),  // shared address space (carrier-grade NAT)
	netip.MustParsePrefix("192.0.0.0/24"),   // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),  // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),    // reserved, and the broadcast address
	netip.MustParsePrefix("::/96"),          // IPv4-compatible (deprecated)
	netip.MustParsePrefix("100::/64"),       // discard-only
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64
	netip.MustParsePrefix("2001::/32"),      // Teredo: a tunnel to an IPv4 address
	netip.MustParsePrefix("fec0::/10"),      // site-local (deprecated)
}

// guard decides which addresses the sink connects to.
type guard struct {
	allow []netip.Prefix
}

// check returns nil if the sink may connect to addr, and otherwise an
// error wrapping ErrForbiddenAddress that names it.
func (g guard) check(addr netip.Addr) error {
	addr = addr.Unmap()
	for _, p := range g.allow {
		if p.Contains(addr) {
			return nil
		}
	}
	if why := special(addr); why != "" {
		return &forbiddenError{addr: addr, why: why}
	}
	// Addresses that carry an IPv4 address inside: as that address.
	if embedded, ok := embeddedIPv4(addr); ok {
		for _, p := range g.allow {
			if p.Contains(embedded) {
				return nil
			}
		}
		if why := special(embedded); why != "" {
			return &forbiddenError{addr: addr, why: why + ", inside " + addr.String()}
		}
	}
	return nil
}

// special says what kind of special address addr is, or "" for a
// public one.
func special(addr netip.Addr) string {
	switch {
	case !addr.IsValid():
		return "an invalid address"
	case addr.IsUnspecified():
		return "unspecified"
	case addr.IsLoopback():
		return "loopback"
	case addr.IsPrivate():
		return "private"
	case addr.IsLinkLocalUnicast():
		return "link-local"
	case addr.IsMulticast(), addr.IsLinkLocalMulticast(), addr.IsInterfaceLocalMulticast():
		return "multicast"
	}
	for _, p := range forbiddenNetworks {
		if p.Contains(addr) {
			return "special-purpose (" + p.String() + ")"
		}
	}
	return ""
}

// Ranges that carry an IPv4 address: NAT64 in the last 32 bits, 6to4 in
// bits 16 to 48. (IPv4-mapped addresses are unmapped first.)
var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

func embeddedIPv4(addr netip.Addr) (netip.Addr, bool) {
	if !addr.Is6() {
		return netip.Addr{}, false
	}
	b := addr.As16()
	switch {
	case nat64.Contains(addr):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(addr):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

type forbiddenError struct {
	addr netip.Addr
	why  string
}

func (e *forbiddenError) Error() string {
	return fmt.Sprintf("address %s is %s, which Config.AllowNetworks does not allow", e.addr, e.why)
}

func (e *forbiddenError) Is(target error) bool { return target == ErrForbiddenAddress }

// control is the dialer's Control function: it runs for every address
// the dialer tries, after the name was resolved and before connecting,
// so a name that resolves to a public address once and to a private one
// at the next lookup (DNS rebinding) is caught at the connection that
// matters, and so is each address of a name with several.
func (g guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot parse the address %q", ErrForbiddenAddress, address)
	}
	return g.check(ap.Addr())
}

// dialer is a net.Dialer whose every connection passes the guard.
func (g guard) dialer(cfg Config) *net.Dialer {
	return &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second, Control: g.control}
}
