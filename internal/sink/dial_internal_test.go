package sink

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A host name passes the URL check; the address it resolves to is checked
// when connecting. Dial the transport directly to exercise that check.
func TestDialRefusesLoopbackAtConnect(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	w, err := NewWebhook(WebhookConfig{Secret: []byte("k")})
	require.NoError(t, err)
	defer w.Close()
	dial := w.client.Transport.(*http.Transport).DialContext
	_, err = dial(context.Background(), "tcp", l.Addr().String())
	require.ErrorIs(t, err, ErrRefusedAddress)

	open, err := NewWebhook(WebhookConfig{Secret: []byte("k"), AllowPrivate: true})
	require.NoError(t, err)
	defer open.Close()
	c, err := open.client.Transport.(*http.Transport).DialContext(context.Background(), "tcp", l.Addr().String())
	require.NoError(t, err)
	c.Close()
}

func TestRefusedAddresses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		addr                 string
		byDefault, ifAllowed bool // refused?
	}{
		{"93.184.216.34", false, false},      // public
		{"2606:2800:220:1::1", false, false}, // public IPv6
		{"10.1.2.3", true, false},            // private networks
		{"172.16.0.1", true, false},
		{"172.31.255.255", true, false},
		{"172.32.0.1", false, false}, // outside 172.16/12
		{"192.168.1.1", true, false},
		{"fd12:3456::1", true, false},    // fc00::/7
		{"100.64.0.1", true, false},      // shared address space
		{"::ffff:10.0.0.1", true, false}, // mapped
		{"127.0.0.1", true, false},       // loopback
		{"::1", true, false},
		{"169.254.10.10", true, false}, // link-local
		{"fe80::1", true, false},
		{"169.254.169.254", true, true}, // metadata: always
		{"fd00:ec2::254", true, true},
		{"100.100.100.200", true, true},
		{"0.0.0.0", true, true},   // unspecified: always
		{"224.0.0.1", true, true}, // multicast: always
	}
	for _, tc := range cases {
		a := netip.MustParseAddr(tc.addr)
		require.Equal(t, tc.byDefault, refused(a, false) != "", "%s by default: %q", tc.addr, refused(a, false))
		require.Equal(t, tc.ifAllowed, refused(a, true) != "", "%s with AllowPrivate: %q", tc.addr, refused(a, true))
	}
}

// A host name that does not exist fails for good at the first attempt (a
// retry cannot make it exist); a DNS failure that may pass is retried.
func TestWebhookUnresolvableHostIsPermanent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		dnsErr    *net.DNSError
		permanent bool
		dials     int
	}{
		{"no such host", &net.DNSError{Err: "no such host", Name: "gone.example", IsNotFound: true}, true, 1},
		{"server failure", &net.DNSError{Err: "server misbehaving", Name: "gone.example", IsTemporary: true}, false, 3},
	} {
		w, err := NewWebhook(WebhookConfig{Secret: []byte("k"), Attempts: 3, Backoff: time.Millisecond})
		require.NoError(t, err)
		var dials atomic.Int32
		// A stand-in for the resolver's answer (the test must not depend
		// on the machine's DNS): the dialer fails as net.Dialer does.
		w.client.Transport.(*http.Transport).DialContext = func(context.Context, string, string) (net.Conn, error) {
			dials.Add(1)
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: tc.dnsErr}
		}
		err = w.Publish(context.Background(), []Record{{RequestID: "r", DecisionID: "d", Reply: []string{"https://gone.example/hook"}}})
		require.Error(t, err, tc.name)
		require.Equal(t, tc.permanent, errors.Is(err, ErrPermanent), "%s: %v", tc.name, err)
		require.Equal(t, tc.permanent, errors.Is(err, ErrUnresolvable), tc.name)
		require.EqualValues(t, tc.dials, dials.Load(), tc.name)
		w.Close()
	}
}

// The same through the machine's resolver, where it answers that a name
// under .invalid (reserved, RFC 6761) does not exist.
func TestWebhookInvalidTLDIsPermanent(t *testing.T) {
	t.Parallel()
	const host = "verdict-webhook-test.invalid"
	_, err := net.DefaultResolver.LookupHost(context.Background(), host)
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Skipf("this machine's resolver does not answer NXDOMAIN for %s: %v", host, err)
	}
	w, err := NewWebhook(WebhookConfig{Secret: []byte("k"), Backoff: time.Millisecond})
	require.NoError(t, err)
	defer w.Close()
	err = w.Publish(context.Background(), []Record{{RequestID: "r", DecisionID: "d", Reply: []string{"https://" + host + "/hook"}}})
	require.ErrorIs(t, err, ErrPermanent)
	require.ErrorIs(t, err, ErrUnresolvable)
}

// Metadata addresses stay refused at connect time with AllowPrivate.
func TestDialRefusesMetadataEvenWhenPrivateAllowed(t *testing.T) {
	t.Parallel()
	w, err := NewWebhook(WebhookConfig{Secret: []byte("k"), AllowPrivate: true})
	require.NoError(t, err)
	defer w.Close()
	_, err = w.client.Transport.(*http.Transport).DialContext(context.Background(), "tcp", "169.254.169.254:80")
	require.ErrorIs(t, err, ErrRefusedAddress)
}
