package github

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"unicode"
)

// URLRule says which URLs CheckURL accepts.
const URLRule = "use https:// (http:// only to a loopback host: 127.0.0.0/8, ::1 or localhost)"

// CheckURL is the rule for every URL that GitHub credentials, runner
// registration tokens or the runner itself travel over: the provider's API
// root, the agent's GitHub URL and its runner download URL. Plain http would
// let anyone on the way read a token or swap the runner, so only https is
// accepted, and http only to a loopback host, which never leaves the
// machine (tests use it).
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" || strings.IndexFunc(raw, unicode.IsSpace) >= 0 {
		return fmt.Errorf("%q is not a URL such as https://github.example.com; %s", raw, URLRule)
	}
	switch {
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return nil
	case u.Scheme == "http":
		return fmt.Errorf("%q uses plain http:// to a host that is not loopback, so tokens or the runner could be read or changed on the way; %s", raw, URLRule)
	default:
		return fmt.Errorf("%q is not an https:// URL; %s", raw, URLRule)
	}
}

// isLoopback: localhost, or an address in 127.0.0.0/8 or ::1.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
