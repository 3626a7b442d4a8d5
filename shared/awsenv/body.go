package awsenv

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// OwnBodies is c (the SDK's default client when nil) with every request
// body handed to the transport as a copy of its own, in memory.
//
// Why: the SDK (smithy-go's ClientHandler) closes a request's body as soon
// as Client.Do returns, which is when the response's headers have come,
// and its closed body then reads as io.EOF. net/http's transport may not
// be done with the body by then: it writes a body it does not know to be
// in memory in a call of its own after the headers, then reads once more
// to check that nothing is left. When that goroutine is held up between
// the two (a busy machine, a Lambda function's slice of a CPU) while the
// server has the whole request and answers, the check reads the closed
// body, its io.EOF is taken for a write error, and the transport closes
// the connection under the response being read: "deserialization failed
// … use of closed network connection" on a request that took effect. The
// SDK retries that (aws-sdk-go-v2 issue 2737), so a send or a conditional
// write is made twice; one without retries fails. A body the transport
// owns, and knows to be in memory, is written with the headers and never
// goes away under it. Request bodies of the AWS APIs ghclaim calls are
// small (SQS 256 KB, DynamoDB 400 KB at most), so the copy costs little.
// OwnBodies of a client it returned is that client.
func OwnBodies(c aws.HTTPClient) aws.HTTPClient {
	switch c := c.(type) {
	case nil:
		return ownBodies{next: awshttp.NewBuildableClient(), sdks: true}
	case ownBodies:
		return c
	default:
		return ownBodies{next: c}
	}
}

// IsDefault reports whether c is the SDK's own client: nil, or
// OwnBodies(nil). A wiring that bounds its attempts replaces only that,
// never a client chosen for it (a test's, a bounded one).
func IsDefault(c aws.HTTPClient) bool {
	o, ok := c.(ownBodies)
	return c == nil || ok && o.sdks
}

type ownBodies struct {
	next aws.HTTPClient
	sdks bool // next is the SDK's own client, made by OwnBodies(nil)
}

func (o ownBodies) Do(req *http.Request) (*http.Response, error) {
	if req.Body == nil || req.Body == http.NoBody || req.ContentLength <= 0 {
		// No body, or a stream of unknown length: left to the transport.
		return o.next.Do(req)
	}
	b, err := io.ReadAll(io.LimitReader(req.Body, req.ContentLength+1))
	_ = req.Body.Close() // the transport closes the body it is given, and it is given the copy
	if err != nil {
		return nil, fmt.Errorf("read the request body: %w", err)
	}
	if int64(len(b)) != req.ContentLength {
		return nil, fmt.Errorf("request body of %d bytes, Content-Length %d", len(b), req.ContentLength)
	}
	own := req.WithContext(req.Context()) // a shallow copy: the caller's request is left as it was
	own.Body = io.NopCloser(bytes.NewReader(b))
	own.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return o.next.Do(own)
}
