package webhook

import (
	"errors"
	"net/netip"
	"testing"
)

// TestGuardAddresses: which addresses the sink connects to by default,
// and what an allow-list opens.
func TestGuardAddresses(t *testing.T) {
	refused := []string{
		"127.0.0.1", "127.255.0.9", "::1", "0.0.0.0", "::", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1",
		"fc00::1", "fd12:3456::1", "169.254.169.254", "fe80::1", "224.0.0.1", "239.1.1.1", "ff02::1", "255.255.255.255",
		"100.64.0.1", "100.127.255.254", "0.1.2.3", "192.0.0.8", "198.18.0.1", "240.0.0.1", "fec0::1", "100::1",
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "::127.0.0.1", "64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "2002:7f00:1::1",
		"2002:a9fe:a9fe::", "2001::1", "64:ff9b:1::1",
	}
	allowed := []string{"8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111", "172.32.0.1", "100.128.0.1",
		"64:ff9b::808:808", "2002:808:808::1", "::ffff:8.8.8.8"}
	var g guard
	for _, a := range refused {
		err := g.check(netip.MustParseAddr(a))
		if !errors.Is(err, ErrForbiddenAddress) {
			t.Errorf("%s: got %v, want it refused", a, err)
		}
	}
	for _, a := range allowed {
		if err := g.check(netip.MustParseAddr(a)); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
	g.allow = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	for _, a := range []string{"10.9.9.9", "::1", "::ffff:10.0.0.1", "64:ff9b::a00:1"} {
		if err := g.check(netip.MustParseAddr(a)); err != nil {
			t.Errorf("%s with 10.0.0.0/8 and ::1 allowed: %v", a, err)
		}
	}
	if err := g.check(netip.MustParseAddr("127.0.0.1")); err == nil {
		t.Error("127.0.0.1 is not in the allow-list")
	}
	if err := g.control("tcp", "not an address", nil); !errors.Is(err, ErrForbiddenAddress) {
		t.Errorf("an address that does not parse: %v", err)
	}
}
