package serve

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"slices"
	"strings"
)

// openPaths answer without the API key: a load balancer's health check and
// a Prometheus scraper carry none (nor does a browser opening the chat
// page: pagePath).
var openPaths = []string{"/health", "/metrics"}

// corsMaxAge is how long, in seconds, a browser may keep a preflight's
// answer (Chrome keeps it 2 hours at most, Firefox 24).
const corsMaxAge = "86400"

// corsHeaders are the request headers a preflight always allows: the API
// key (either header) and the JSON body's type. The headers a preflight
// asks for are allowed too (the SDKs send x-stainless-* headers of their
// own).
const corsHeaders = "Authorization, Content-Type, X-Api-Key"

// gate answers what comes before the endpoints, and reports whether it did:
// a CORS preflight (when Config.CORSOrigins allows cross-origin requests)
// and a request without the API key (when Config.APIKey is set). The
// answer to an allowed origin carries Access-Control-Allow-Origin, so that
// a browser lets the page read it, a 401 included.
func (s *Server) gate(w http.ResponseWriter, r *http.Request) bool {
	if len(s.cfg.CORSOrigins) > 0 {
		origin := r.Header.Get("Origin")
		allowed := origin != "" && s.corsAllowed(origin)
		h := w.Header()
		wildcard := slices.Contains(s.cfg.CORSOrigins, "*")
		if !wildcard {
			h.Add("Vary", "Origin") // the answer depends on it, allowed or not
		}
		if allowed {
			if wildcard {
				h.Set("Access-Control-Allow-Origin", "*")
			} else {
				h.Set("Access-Control-Allow-Origin", origin)
			}
			h.Set("Access-Control-Expose-Headers", "Retry-After")
		}
		if r.Method == http.MethodOptions {
			// A preflight, or any OPTIONS: 204 with what the server allows
			// (without the CORS headers to an origin it does not allow,
			// which the browser then refuses).
			if allowed {
				h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
				headers := corsHeaders
				if asked := strings.TrimSpace(r.Header.Get("Access-Control-Request-Headers")); asked != "" {
					headers += ", " + asked
				}
				h.Set("Access-Control-Allow-Headers", headers)
				h.Set("Access-Control-Max-Age", corsMaxAge)
				h.Add("Vary", "Access-Control-Request-Method")
				h.Add("Vary", "Access-Control-Request-Headers")
			}
			h.Set("Allow", "GET, POST, OPTIONS")
			w.WriteHeader(http.StatusNoContent)
			return true
		}
	}
	if s.apiKeyHash == nil || slices.Contains(openPaths, r.URL.Path) || pagePath(r.URL.Path) {
		return false
	}
	// The key comes as a Bearer token (OpenAI's clients) or as x-api-key
	// (Anthropic's).
	key, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		key = strings.TrimSpace(r.Header.Get("X-Api-Key"))
	}
	if key != "" {
		// Compared as digests: the time taken tells nothing of the key,
		// not even its length.
		got := sha256.Sum256([]byte(key))
		if subtle.ConstantTimeCompare(got[:], s.apiKeyHash) == 1 {
			return false
		}
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="llamaserve"`)
	msg := "Incorrect API key provided: give the server's key (llamaserve --api-key) as Authorization: Bearer KEY or x-api-key: KEY"
	if r.Header.Get("Authorization") == "" && r.Header.Get("X-Api-Key") == "" {
		msg = "You didn't provide an API key: give the server's key (llamaserve --api-key) as Authorization: Bearer KEY or x-api-key: KEY"
	}
	if isMessagesPath(r.URL.Path) {
		w = anthropicWriter{w}
	}
	writeError(w, &requestError{status: http.StatusUnauthorized, code: "invalid_api_key", msg: msg})
	return true
}

// corsAllowed reports whether origin may call the server from a browser.
func (s *Server) corsAllowed(origin string) bool {
	for _, o := range s.cfg.CORSOrigins {
		if o == "*" || strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return true
		}
	}
	return false
}

// bearer reads the token of an Authorization header of the Bearer scheme.
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// apiKeyDigest is the digest gate compares a request's key with; nil
// without a key.
func apiKeyDigest(key string) []byte {
	if key == "" {
		return nil
	}
	d := sha256.Sum256([]byte(key))
	return d[:]
}
