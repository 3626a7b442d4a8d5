package iamcheck

import (
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
)

// Proxy is an endpoint for a function binary (AWS_ENDPOINT_URL): it
// forwards each request its role allows to the emulator at target and
// answers any other as AWS does.
func Proxy(c *Checker, target *url.URL) http.Handler {
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = http.DefaultTransport.(*http.Transport).Clone()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if resp := c.check(r); resp != nil {
			for k, v := range resp.Header {
				w.Header()[k] = v
			}
			w.WriteHeader(resp.StatusCode)
			_, _ = io.Copy(w, resp.Body)
			return
		}
		rp.ServeHTTP(w, r)
	})
}
