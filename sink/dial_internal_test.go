package sink

import (
	"context"
	"net"
	"net/http"
	"testing"

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
