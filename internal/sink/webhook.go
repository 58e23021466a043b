package sink

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sethvargo/go-retry"
)

// Webhook headers.
const (
	// HeaderTimestamp carries the Unix time (seconds) of the delivery.
	HeaderTimestamp = "X-Verdict-Timestamp"
	// HeaderSignature carries "v1=" + hex HMAC-SHA256(secret, timestamp + "." + body).
	HeaderSignature = "X-Verdict-Signature"
	// HeaderKey carries the idempotency key: a record's request id/decision
	// id, an event's Key.
	HeaderKey = "X-Verdict-Idempotency-Key"
	// HeaderEvent carries an event's kind ("feedback"); records have none.
	HeaderEvent = "X-Verdict-Event"
)

// ErrRefusedAddress: a webhook resolved to an address verdict does not
// post to (see WebhookConfig.AllowPrivate) or to a host that is not
// allowed.
var ErrRefusedAddress = errors.New("sink: webhook address refused")

// ErrUnresolvable: a webhook's host name does not exist (the DNS answered
// that there is no such host). It is permanent: retrying a name that does
// not exist would only publish the record again to the other sinks on
// every attempt until the message dead-letters.
var ErrUnresolvable = errors.New("sink: webhook host does not resolve")

// WebhookConfig configures the webhook sink. The zero value of a field
// means its default, given in the field's comment.
type WebhookConfig struct {
	// URL receives every record and every event. Defaults to none: only
	// the reply URLs a request names receive its records, and events go
	// nowhere.
	URL string
	// Secret keys the HMAC-SHA256 signature. Required.
	Secret []byte
	// AllowHosts lists the hosts webhooks may go to: "example.com" allows
	// that host, ".example.com" its subdomains. Defaults to any host.
	AllowHosts []string
	// AllowPrivate permits addresses that are not on the public internet:
	// private networks (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16,
	// fc00::/7, 100.64.0.0/10), loopback and link-local — for webhooks
	// inside a VPC, on the same host, and for tests. Cloud metadata
	// addresses (169.254.169.254, fd00:ec2::254, 100.100.100.200) and the
	// unspecified and multicast addresses are refused even then. Defaults to
	// false: only public addresses.
	AllowPrivate bool
	// Timeout bounds one attempt. Defaults to 10 s.
	Timeout time.Duration
	// Attempts is the most tries per record and URL. Defaults to 5.
	Attempts int
	// Backoff is the wait before the second attempt; it doubles each time
	// up to 30 s. Defaults to 500 ms.
	Backoff time.Duration
}

// withDefaults fills the fields left zero. It runs after validate.
func (c WebhookConfig) withDefaults() WebhookConfig {
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.Attempts == 0 {
		c.Attempts = 5
	}
	if c.Backoff == 0 {
		c.Backoff = 500 * time.Millisecond
	}
	return c
}

// validate checks the configuration as given (zero: the default).
func (c WebhookConfig) validate() error {
	switch {
	case len(c.Secret) == 0:
		return fmt.Errorf("%w: WebhookConfig.Secret is required", ErrConfig)
	case c.Timeout < 0:
		return fmt.Errorf("%w: WebhookConfig.Timeout must be > 0 (0: 10s), got %v", ErrConfig, c.Timeout)
	case c.Attempts < 0:
		return fmt.Errorf("%w: WebhookConfig.Attempts must be >= 1 (0: 5), got %d", ErrConfig, c.Attempts)
	case c.Backoff < 0:
		return fmt.Errorf("%w: WebhookConfig.Backoff must be > 0 (0: 500ms), got %v", ErrConfig, c.Backoff)
	}
	for i, h := range c.AllowHosts {
		if strings.TrimPrefix(h, ".") == "" || strings.ContainsAny(h, "/: ") {
			return fmt.Errorf("%w: WebhookConfig.AllowHosts[%d]: %q is not a host name", ErrConfig, i, h)
		}
	}
	if c.URL != "" {
		if _, err := c.checkURL(c.URL); err != nil {
			return fmt.Errorf("%w: WebhookConfig.URL: %v", ErrConfig, err)
		}
	}
	return nil
}

// Webhook posts each record to the configured URL and to the record's
// reply URLs, and each event to the configured URL.
type Webhook struct {
	cfg     WebhookConfig
	client  *http.Client
	nowFunc func() time.Time
}

var (
	_ Sink      = (*Webhook)(nil)
	_ EventSink = (*Webhook)(nil)
)

// NewWebhook validates cfg and builds the sink.
func NewWebhook(cfg WebhookConfig) (*Webhook, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	dialer := &net.Dialer{Timeout: cfg.Timeout}
	// Checked at connect time, on the address actually dialled, so a DNS
	// answer cannot smuggle a refused address past the URL check.
	dialer.Control = func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: %s", ErrRefusedAddress, address)
		}
		if why := refused(ap.Addr(), cfg.AllowPrivate); why != "" {
			return fmt.Errorf("%w: %s is %s", ErrRefusedAddress, ap.Addr(), why)
		}
		return nil
	}
	tr := &http.Transport{DialContext: dialer.DialContext, Proxy: nil, MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second}
	return &Webhook{cfg: cfg, nowFunc: time.Now, client: &http.Client{
		Transport: tr,
		Timeout:   cfg.Timeout,
		// Redirects are not followed: a redirect could lead anywhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}, nil
}

// Name is "webhook".
func (w *Webhook) Name() string { return "webhook" }

// Close drops idle connections.
func (w *Webhook) Close() { w.client.CloseIdleConnections() }

var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure
	netip.MustParseAddr("fd00:ec2::254"),   // AWS IPv6
	netip.MustParseAddr("100.100.100.200"), // Alibaba
}

// sharedAddressSpace is 100.64.0.0/10 (carrier-grade NAT, RFC 6598): not
// routed on the public internet.
var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

// refused says why an address may not receive webhooks ("" when it may).
// Cloud metadata, unspecified and multicast addresses are always refused;
// private networks, loopback and link-local unless allowPrivate.
func refused(a netip.Addr, allowPrivate bool) string {
	a = a.Unmap()
	for _, m := range metadataAddrs {
		if a == m {
			return "a cloud metadata address"
		}
	}
	switch {
	case a.IsUnspecified():
		return "the unspecified address"
	case a.IsMulticast():
		return "a multicast address"
	case allowPrivate:
		return ""
	case a.IsLoopback():
		return "a loopback address"
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	case a.IsPrivate(), sharedAddressSpace.Contains(a):
		return "a private-network address"
	}
	return ""
}

// checkURL parses a webhook URL and applies the host rules that can be
// checked without connecting.
func (c WebhookConfig) checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRefusedAddress, err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return nil, fmt.Errorf("%w: %q: scheme must be http or https", ErrRefusedAddress, raw)
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return nil, fmt.Errorf("%w: %q has no host", ErrRefusedAddress, raw)
	}
	if len(c.AllowHosts) > 0 {
		ok := false
		for _, h := range c.AllowHosts {
			h = strings.ToLower(h)
			if host == h || (strings.HasPrefix(h, ".") && strings.HasSuffix(host, h)) {
				ok = true
				break
			}
		}
		if !ok {
			return nil, fmt.Errorf("%w: host %q is not in the allowlist", ErrRefusedAddress, host)
		}
	}
	if !c.AllowPrivate && (host == "localhost" || strings.HasSuffix(host, ".localhost")) {
		return nil, fmt.Errorf("%w: %q is a loopback host", ErrRefusedAddress, host)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if why := refused(a, c.AllowPrivate); why != "" {
			return nil, fmt.Errorf("%w: %s is %s", ErrRefusedAddress, a, why)
		}
	}
	return u, nil
}

// Sign returns the signature header value for body sent at timestamp ts
// (Unix seconds): "v1=" + hex HMAC-SHA256(secret, ts + "." + body).
func Sign(secret []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks a delivery's signature in constant time and that its
// timestamp is within tolerance of now. Receivers use it (or its recipe).
func Verify(secret []byte, ts, signature string, body []byte, now time.Time, tolerance time.Duration) bool {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return false
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return false
	}
	return hmac.Equal([]byte(Sign(secret, ts, body)), []byte(signature))
}

// Publish posts every record to every URL it goes to. A refused address,
// a disallowed host, a host name that does not exist (ErrUnresolvable) or
// a 4xx answer (other than 408 and 429) fails with ErrPermanent at once;
// other failures are retried with backoff. The returned error is permanent
// only when every failure was: one transient failure beside a permanent
// one keeps the message for another try.
func (w *Webhook) Publish(ctx context.Context, recs []Record) error {
	var fs postFailures
	for i := range recs {
		targets := recs[i].Reply
		if w.cfg.URL != "" {
			targets = append([]string{w.cfg.URL}, targets...)
		}
		if len(targets) == 0 {
			continue
		}
		body, err := recs[i].Marshal()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrPermanent, err)
		}
		for _, t := range targets {
			fs.add(w.post(ctx, t, recs[i].Key(), body, nil))
		}
	}
	return fs.err()
}

// PublishEvents posts every event's body to the configured URL (events
// have no reply URLs; with no configured URL it does nothing), signed as
// records are, with the event's key in X-Verdict-Idempotency-Key and its
// kind in X-Verdict-Event. Failures are retried, and are permanent, as in
// Publish; an invalid event (an empty field, a body that is not JSON) is
// permanent and nothing is posted.
func (w *Webhook) PublishEvents(ctx context.Context, evs []Event) error {
	if w.cfg.URL == "" {
		return nil
	}
	for i := range evs {
		if err := evs[i].check(i); err != nil {
			return err
		}
	}
	var fs postFailures
	for i := range evs {
		fs.add(w.post(ctx, w.cfg.URL, evs[i].Key, evs[i].Body, http.Header{HeaderEvent: {evs[i].Kind}}))
	}
	return fs.err()
}

// postFailures collects the failed posts of one Publish or PublishEvents.
type postFailures struct{ all, transient []error }

func (f *postFailures) add(err error) {
	if err == nil {
		return
	}
	f.all = append(f.all, err)
	if !errors.Is(err, ErrPermanent) {
		f.transient = append(f.transient, err)
	}
}

// err joins the transient failures when there are any (the caller should
// try again), else the permanent ones; nil when every post succeeded.
func (f *postFailures) err() error {
	if len(f.transient) > 0 {
		return errors.Join(f.transient...)
	}
	return errors.Join(f.all...)
}

// post sends body to target with the signing headers, key in HeaderKey
// and the extra headers (nil for records), retrying as Publish says.
func (w *Webhook) post(ctx context.Context, target, key string, body []byte, extra http.Header) error {
	u, err := w.cfg.checkURL(target)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPermanent, err)
	}
	b := retry.WithMaxRetries(uint64(w.cfg.Attempts-1), retry.WithCappedDuration(30*time.Second, retry.NewExponential(max(w.cfg.Backoff, time.Millisecond))))
	err = retry.Do(ctx, b, func(ctx context.Context) error {
		ts := strconv.FormatInt(w.nowFunc().Unix(), 10)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("%w: %w", ErrPermanent, err)
		}
		for k, vs := range extra {
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", "verdict-webhook/1")
		req.Header.Set(HeaderTimestamp, ts)
		req.Header.Set(HeaderSignature, Sign(w.cfg.Secret, ts, body))
		req.Header.Set(HeaderKey, key)
		resp, err := w.client.Do(req)
		if err != nil {
			if errors.Is(err, ErrRefusedAddress) {
				return fmt.Errorf("%w: %w", ErrPermanent, err)
			}
			var dnsErr *net.DNSError
			if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
				return fmt.Errorf("%w: %w: %w", ErrPermanent, ErrUnresolvable, err)
			}
			return retry.RetryableError(err)
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		switch {
		case resp.StatusCode >= 200 && resp.StatusCode < 300:
			return nil
		case resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode >= 500:
			return retry.RetryableError(fmt.Errorf("status %d", resp.StatusCode))
		default:
			return fmt.Errorf("%w: status %d", ErrPermanent, resp.StatusCode)
		}
	})
	if err != nil {
		return fmt.Errorf("sink: webhook %s (%s): %w", u.Redacted(), key, err)
	}
	return nil
}
