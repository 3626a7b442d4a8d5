package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/infra/local/rie"
	"github.com/ghclaim/ghclaim/shared/webhook"
)

// ColdStart is one function's init, measured under the local Lambda host
// (infra/local/rie: the real bootstrap, built for this machine, under the
// AWS Lambda Runtime Interface Emulator on 127.0.0.1).
type ColdStart struct {
	Function string `json:"function"`
	Samples  int    `json:"samples"`
	// InitMS is a cold invocation minus a warm one of the same event: the
	// process start, Go's package init, main's wiring (configuration, SDK
	// clients, secrets) and the runtime's first request for an event.
	InitMS Latency `json:"init"`
	// WarmMS is the warm invocation it was compared with.
	WarmMS float64 `json:"warm_ms"`
	// PackageInitMS is the sum of Go's package initialisers (GODEBUG
	// inittrace); Top the costliest ones.
	PackageInitMS float64   `json:"package_init_ms"`
	Top           []PkgInit `json:"top_package_inits"`
	// InitCalls are the AWS requests of the init phase, and their time.
	InitCalls  map[string]int `json:"init_calls"`
	InitCallMS float64        `json:"init_call_ms"`
}

// PkgInit is one package's initialiser.
type PkgInit struct {
	Package string  `json:"package"`
	MS      float64 `json:"ms"`
	Allocs  int     `json:"allocs"`
}

// countingProxy forwards every request to the emulator and counts it: the
// bootstraps are separate processes, so their requests are counted where
// they leave the machine's loopback.
type countingProxy struct {
	srv *httptest.Server
	c   *Counter
}

func newCountingProxy(target string) (*countingProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = http.DefaultTransport.(*http.Transport).Clone()
	c := NewCounter(&http.Client{Transport: rp.Transport})
	p := &countingProxy{c: c}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := Operation(r)
		t0 := time.Now()
		rp.ServeHTTP(w, r)
		c.record(op, time.Since(t0), request{})
	}))
	return p, nil
}

// MeasureColdStarts starts each function's bootstrap samples times under
// the Runtime Interface Emulator rieBin and compares its cold invocation
// with warm ones. bootstraps maps a function name to its binary (built for
// this machine).
func MeasureColdStarts(ctx context.Context, srv *emulator.Server, env *Env, bootstraps map[string]string, rieBin string, samples int) ([]ColdStart, error) {
	proxy, err := newCountingProxy(srv.Endpoint)
	if err != nil {
		return nil, err
	}
	defer proxy.srv.Close()

	// The GitHub App key lives where an operator puts it: the stack's secret.
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	sm := secretsmanager.NewFromConfig(env.Raw)
	if _, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{
		SecretId: aws.String(env.Stack.GitHubAppPrivateKeyARN), SecretString: aws.String(string(keyPEM)),
	}); err != nil {
		return nil, fmt.Errorf("bench: store the app key: %w", err)
	}
	sec, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(env.Stack.WebhookSecretARN)})
	if err != nil {
		return nil, fmt.Errorf("bench: read the webhook secret: %w", err)
	}
	gh := httptest.NewServer(ghfake.New(ghfake.WithAppID(appID), ghfake.WithPublicKey(&key.PublicKey)))
	defer gh.Close()

	pools, _ := json.Marshal([]any{BenchPool})
	common := map[string]string{
		"AWS_ENDPOINT_URL": proxy.srv.URL, "AWS_REGION": emulator.Region,
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"TABLE_NAME": env.Stack.TableName, "CLAIMS_QUEUE_URL": env.Stack.QueueURL,
		"RUNNER_POOLS": string(pools), "LOG_LEVEL": "info", "GODEBUG": "inittrace=1",
	}
	ping := `{"zen":"Keep it logically awesome.","hook_id":1}`
	pingEvent, _ := json.Marshal(events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: "/",
		Headers: map[string]string{
			"x-github-event": "ping", "x-github-delivery": "bench-ping", "content-type": "application/json",
			"x-hub-signature-256": webhook.SignatureValue([]byte(ping), []byte(aws.ToString(sec.SecretString))),
		},
		RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST", Path: "/"}},
		Body:           ping,
	})
	app := map[string]string{
		"GITHUB_APP_ID": strconv.Itoa(appID), "GITHUB_APP_PRIVATE_KEY_ARN": env.Stack.GitHubAppPrivateKeyARN, "GITHUB_API_URL": gh.URL,
	}
	specs := []struct {
		name    string
		env     map[string]string
		event   []byte
		timeout time.Duration
	}{
		{"webhook", map[string]string{"WEBHOOK_SECRET_ARN": env.Stack.WebhookSecretARN}, pingEvent, 10 * time.Second},
		{"claimer", app, []byte(`{"Records":[]}`), ClaimTimeout},
		// The reclaimer takes back what an abandoned attempt left: it needs the App too.
		{"reclaimer", app, []byte(`{"version":"0","id":"bench","detail-type":"Scheduled Event","source":"aws.events","detail":{}}`), 55 * time.Second},
	}
	var out []ColdStart
	for _, s := range specs {
		path, ok := bootstraps[s.name]
		if !ok {
			return nil, fmt.Errorf("bench: no bootstrap for %s", s.name)
		}
		fenv := map[string]string{}
		for k, v := range common {
			fenv[k] = v
		}
		for k, v := range s.env {
			fenv[k] = v
		}
		cs, err := coldStarts(ctx, s.name, path, rieBin, fenv, s.event, s.timeout, samples, proxy.c)
		if err != nil {
			return nil, err
		}
		out = append(out, cs)
	}
	return out, nil
}

// syncBuffer collects a runtime's output.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) take() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := bytes.Clone(b.buf.Bytes())
	b.buf.Reset()
	return out
}

func coldStarts(ctx context.Context, name, path, rieBin string, env map[string]string, event []byte, timeout time.Duration, samples int, c *Counter) (ColdStart, error) {
	out := &syncBuffer{}
	h, err := rie.New(rie.Config{Name: "ghclaim-" + name, Bootstrap: path, RIE: rieBin, Env: env, Timeout: timeout, MemoryMB: 256, Output: out})
	if err != nil {
		return ColdStart{}, err
	}
	defer h.Close()
	cs := ColdStart{Function: name, Samples: samples, InitCalls: map[string]int{}}
	var inits []time.Duration
	var warms []time.Duration
	pkg := map[string]PkgInit{}
	var pkgTotal float64
	var initBusy time.Duration
	for range samples {
		h.Kill()
		// The emulator's own start is the sandbox's, not the function's init.
		if err := h.Start(ctx); err != nil {
			return cs, fmt.Errorf("bench: start %s: %w", name, err)
		}
		out.take()
		before := c.Snapshot()
		t0 := time.Now()
		if _, err := h.Invoke(ctx, event); err != nil {
			return cs, fmt.Errorf("bench: cold invoke %s: %w\n%s", name, err, out.take())
		}
		cold := time.Since(t0)
		coldCalls := c.Snapshot().Since(before)
		trace := out.take()
		// Three warm invocations; the median is the baseline, so one slow
		// emulator answer does not become "init".
		var ws []time.Duration
		var warmCalls Snapshot
		for range 3 {
			before = c.Snapshot()
			t1 := time.Now()
			if _, err := h.Invoke(ctx, event); err != nil {
				return cs, fmt.Errorf("bench: warm invoke %s: %w", name, err)
			}
			ws = append(ws, time.Since(t1))
			warmCalls = c.Snapshot().Since(before)
		}
		sort.Slice(ws, func(i, j int) bool { return ws[i] < ws[j] })
		warm := ws[1]
		inits = append(inits, max(0, cold-warm))
		warms = append(warms, warm)
		// The init phase's requests: the cold invocation's minus the warm one's.
		init := coldCalls.Since(warmCalls)
		for op, k := range init.Calls {
			if k > 0 {
				cs.InitCalls[op] += k
				initBusy += init.OpBusy[op]
			}
		}
		total, per := parseInitTrace(trace)
		pkgTotal += total
		for p, v := range per {
			agg := pkg[p]
			agg.Package, agg.MS, agg.Allocs = p, agg.MS+v.MS, agg.Allocs+v.Allocs
			pkg[p] = agg
		}
	}
	cs.InitMS = Summarise(inits)
	cs.WarmMS = Summarise(warms).P50
	cs.PackageInitMS = round(pkgTotal/float64(samples), 2)
	cs.InitCallMS = ms(initBusy / time.Duration(samples))
	for op := range cs.InitCalls {
		cs.InitCalls[op] /= samples
	}
	var all []PkgInit
	for _, v := range pkg {
		all = append(all, PkgInit{Package: v.Package, MS: round(v.MS/float64(samples), 3), Allocs: v.Allocs / samples})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].MS > all[j].MS })
	cs.Top = all[:min(5, len(all))]
	return cs, nil
}

// initLine is GODEBUG=inittrace=1's line: "init pkg @0.5 ms, 0.12 ms clock, 1234 bytes, 12 allocs".
var initLine = regexp.MustCompile(`^init (\S+) @[0-9.]+ ms, ([0-9.]+) ms clock, \d+ bytes, (\d+) allocs`)

func parseInitTrace(b []byte) (float64, map[string]PkgInit) {
	per := map[string]PkgInit{}
	var total float64
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		m := initLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		v, _ := strconv.ParseFloat(m[2], 64)
		a, _ := strconv.Atoi(m[3])
		total += v
		p := per[m[1]]
		p.Package, p.MS, p.Allocs = m[1], p.MS+v, p.Allocs+a
		per[m[1]] = p
	}
	return total, per
}
