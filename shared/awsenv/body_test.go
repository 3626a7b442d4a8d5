package awsenv_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/shared/awsenv"
)

// closingBody reads as io.EOF once closed, as the body smithy-go hands
// net/http does (its safe read closer).
type closingBody struct {
	mu     sync.Mutex
	r      io.Reader
	closed bool
}

func (b *closingBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, io.EOF
	}
	return b.r.Read(p)
}

func (b *closingBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return nil
}

// lateReader answers at once and keeps the request's body, as a transport
// whose writing goroutine has not finished with it when Do returns.
type lateReader struct{ body io.ReadCloser }

func (l *lateReader) Do(req *http.Request) (*http.Response, error) {
	l.body = req.Body
	return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}}, nil
}

// TestOwnBodiesOutliveTheCallersClose: the caller (the SDK) closes its body
// when Do returns; the transport, still writing, reads the whole body
// anyway. Handed the caller's body, it read nothing past the close.
func TestOwnBodiesOutliveTheCallersClose(t *testing.T) {
	t.Parallel()
	const payload = `{"QueueUrl":"q","MessageBody":"m"}`
	inner := &lateReader{}
	body := &closingBody{r: strings.NewReader(payload)}
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/", body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(payload))
	if _, err := awsenv.OwnBodies(inner).Do(req); err != nil {
		t.Fatal(err)
	}
	_ = body.Close() // what smithy-go does as soon as Do returns
	got, err := io.ReadAll(inner.body)
	if err != nil || string(got) != payload {
		t.Fatalf("the transport read %q (%v) after the caller's close, want the whole body %q", got, err, payload)
	}
	if req.Body != io.ReadCloser(body) {
		t.Error("the caller's request was changed")
	}
}

// TestOwnBodiesRefuseAShortBody: a body shorter than its Content-Length is
// an error that says so, not a request sent cut.
func TestOwnBodiesRefuseAShortBody(t *testing.T) {
	t.Parallel()
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/", io.NopCloser(strings.NewReader("abc")))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 5
	inner := &lateReader{}
	_, err = awsenv.OwnBodies(inner).Do(req)
	if err == nil || !strings.Contains(err.Error(), "3 bytes, Content-Length 5") {
		t.Fatalf("Do: %v, want the lengths named", err)
	}
	if inner.body != nil {
		t.Error("a cut request was sent")
	}
}

// stallingConn holds the goroutine that writes a request's body, after
// the write went out, until the caller reads the response's body: the
// transport's writer descheduled on a busy machine while the server
// answers.
type stallingConn struct {
	net.Conn
	mu      sync.Mutex
	writes  int
	reads   int
	reading chan struct{} // closed at the response body's first read
}

func (c *stallingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.mu.Lock()
	c.writes++
	second := c.writes == 2
	c.mu.Unlock()
	if second {
		select {
		case <-c.reading:
		case <-time.After(5 * time.Second): // bound: never reached when the SDK reads the answer
		}
	}
	return n, err
}

func (c *stallingConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	c.reads++
	if c.reads == 2 { // the first read took the headers
		close(c.reading)
	}
	c.mu.Unlock()
	return c.Conn.Read(p)
}

// answerInTwo serves one request per connection as moto's server does:
// the status line and headers, then, once the client has closed its end or
// 300 ms passed, the body.
func answerInTwo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				req, err := http.ReadRequest(r)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				const body = `{"MessageId":"1","MD5OfMessageBody":"6f8f57715090da2632453988d9a1501b"}`
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\nConnection: close\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n")
				closed := make(chan struct{})
				go func() { _, _ = io.Copy(io.Discard, r); close(closed) }()
				select {
				case <-closed:
				case <-time.After(300 * time.Millisecond):
				}
				_, _ = io.WriteString(c, body)
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

func stallingClient() *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &stallingConn{Conn: c, reading: make(chan struct{})}, nil
		}
	})
}

// TestOwnBodiesKeepTheAnswerOfAStalledWriter: an SQS send through the SDK,
// sent once, whose transport's writer stalls after the body went out. On
// the SDK's own client the answer is cut ("use of closed network
// connection") though the server took the message; through OwnBodies it is
// read whole.
func TestOwnBodiesKeepTheAnswerOfAStalledWriter(t *testing.T) {
	t.Parallel()
	url := answerInTwo(t)
	send := func(hc aws.HTTPClient) error {
		api := sqs.NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(url), Credentials: aws.AnonymousCredentials{},
			RetryMaxAttempts: 1, HTTPClient: hc})
		_, err := api.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(url + "/q"), MessageBody: aws.String("m")})
		return err
	}
	if err := send(awsenv.OwnBodies(stallingClient())); err != nil {
		t.Fatalf("send through OwnBodies: %v", err)
	}
	// The double shows the failure it stands for: without OwnBodies the
	// same send is cut.
	if err := send(stallingClient()); err == nil || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("send through the SDK's client: %v, want the answer cut (net.ErrClosed)", err)
	}
}
