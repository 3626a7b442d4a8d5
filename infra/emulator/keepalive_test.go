package emulator

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ghclaim/ghclaim/shared/awsenv"
)

// The launcher's servers keep a connection for the client's next request, as AWS's endpoints
// do: the SDK's requests in sequence share one connection (werkzeug's handler closed every
// connection after one answer, and each request paid for a connection and a server thread of
// its own).
func TestServersKeepConnectionsAlive(t *testing.T) {
	t.Setenv(EndpointEnv, "") // the launcher's server (the factory's under make test), not LocalStack's
	srv, err := Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	var dials atomic.Int32
	// The functions' client: without OwnBodies a busy box's transport now and then closed a
	// connection under its response (awsenv.OwnBodies says why), and the SDK's retry dialled
	// again (it happened in make test). At most one connection, so that no request dials
	// beside one on its way back to the pool: a kept connection is dialled once, a closed one
	// once per request.
	client := awsenv.OwnBodies(awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.MaxConnsPerHost = 1
		dial := tr.DialContext
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return dial(ctx, network, addr)
		}
	}))
	cfg := srv.ConfigForTest(t)
	cfg.HTTPClient = client
	ddb := dynamodb.NewFromConfig(cfg)
	ctx := context.Background()
	if _, err := ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String("keepalive"), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
	}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: fmt.Sprint(i)}}
		if _, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("keepalive"), Item: key}); err != nil {
			t.Fatal(err)
		}
		if _, err := ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("keepalive"), Key: key}); err != nil {
			t.Fatal(err)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("11 requests in sequence dialled %d connections, want 1", n)
	}
}

// rawConn is one connection to a server, for requests the SDK never sends.
type rawConn struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func dialRaw(t *testing.T, endpoint string) *rawConn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(endpoint, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	return &rawConn{t: t, conn: conn, r: bufio.NewReader(conn)}
}

// do writes one request as given and reads its answer.
func (c *rawConn) do(request string) (*http.Response, string) {
	c.t.Helper()
	if _, err := io.WriteString(c.conn, request); err != nil {
		c.t.Fatal(err)
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		c.t.Fatalf("no answer to %q: %v", request, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("body of %s: %v", resp.Status, err)
	}
	return resp, string(body)
}

// closed says whether the server has closed the connection.
func (c *rawConn) closed() bool {
	c.t.Helper()
	_, err := c.r.ReadByte()
	return err == io.EOF
}

const listTables = "POST / HTTP/1.1\r\nHost: dynamodb.us-east-1.amazonaws.com\r\nContent-Type: application/x-amz-json-1.0\r\n" +
	"X-Amz-Target: DynamoDB_20120810.ListTables\r\n" +
	"Authorization: AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0\r\n"

// A kept connection is only as good as the server's idea of where each request ends: a body
// the application leaves unread, a chunked body, an Expect: 100-continue are all read to
// their end and the next request on the connection is answered; a request that cannot be
// framed, an HTTP/1.0 client and a request the application failed on end the connection,
// said so in the answer.
func TestKeptConnectionsFrameEachRequest(t *testing.T) {
	t.Setenv(EndpointEnv, "")
	srv, err := Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ok := func(t *testing.T, c *rawConn, what string) {
		t.Helper()
		resp, body := c.do(listTables + "Content-Length: 2\r\n\r\n{}")
		if resp.StatusCode != 200 || !strings.Contains(body, "TableNames") || resp.Close {
			t.Fatalf("ListTables after %s on the same connection: %s %q (close %v)", what, resp.Status, body, resp.Close)
		}
	}

	t.Run("unread body", func(t *testing.T) {
		c := dialRaw(t, srv.Endpoint)
		resp, _ := c.do("GET " + readyPath + " HTTP/1.1\r\nHost: localhost\r\nContent-Length: 11\r\n\r\nnot wanted\n")
		if resp.StatusCode/100 != 2 {
			t.Fatalf("GET %s: %s", readyPath, resp.Status)
		}
		ok(t, c, "a body the application did not read")
	})
	t.Run("chunked", func(t *testing.T) {
		c := dialRaw(t, srv.Endpoint)
		resp, body := c.do(listTables + "Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n1\r\n}\r\n0\r\n\r\n")
		if resp.StatusCode != 200 || !strings.Contains(body, "TableNames") {
			t.Fatalf("chunked ListTables: %s %q", resp.Status, body)
		}
		ok(t, c, "a chunked body")
	})
	t.Run("100-continue", func(t *testing.T) {
		c := dialRaw(t, srv.Endpoint)
		if _, err := io.WriteString(c.conn, listTables+"Content-Length: 2\r\nExpect: 100-continue\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(c.r, nil)
		if err != nil || resp.StatusCode != http.StatusContinue {
			t.Fatalf("answer to Expect: 100-continue before the body: %v %v, want 100", resp, err)
		}
		resp, body := c.do("{}")
		if resp.StatusCode != 200 || !strings.Contains(body, "TableNames") {
			t.Fatalf("ListTables after 100 Continue: %s %q", resp.Status, body)
		}
		ok(t, c, "100 Continue")
	})
	t.Run("bad length", func(t *testing.T) {
		// "\xb2" is a superscript two in the Latin-1 that headers are read in: a digit to
		// Python's isdigit, not to int.
		for _, length := range []string{"two", "-2", "+2", "2, 2", "\xb2"} {
			c := dialRaw(t, srv.Endpoint)
			resp, body := c.do(listTables + "Content-Length: " + length + "\r\n\r\n{}")
			if resp.StatusCode != 400 || !strings.Contains(body, "Content-Length") || !resp.Close || !c.closed() {
				t.Fatalf("Content-Length: %q: %s %q (close %v), want 400 naming it, connection closed", length, resp.Status, body, resp.Close)
			}
		}
	})
	t.Run("HTTP/1.0", func(t *testing.T) {
		c := dialRaw(t, srv.Endpoint)
		resp, _ := c.do(strings.Replace(listTables, "HTTP/1.1", "HTTP/1.0", 1) + "Content-Length: 2\r\n\r\n{}")
		if closed := c.closed(); resp.StatusCode != 200 || !closed {
			t.Fatalf("HTTP/1.0 ListTables: %s, connection closed %v; want 200, closed", resp.Status, closed)
		}
	})
	t.Run("application failed", func(t *testing.T) {
		// moto raises on an action it has not implemented (DynamoDB answers 400
		// UnknownOperationException): the server answers 500 and ends the connection,
		// whose state it can no longer vouch for.
		c := dialRaw(t, srv.Endpoint)
		resp, body := c.do(strings.Replace(listTables, "ListTables", "NoSuchOperation", 1) + "Content-Length: 2\r\n\r\n{}")
		if resp.StatusCode != 500 || !resp.Close || !c.closed() {
			t.Fatalf("a request moto raised on: %s %q (close %v), want 500, connection closed", resp.Status, body, resp.Close)
		}
	})
}
